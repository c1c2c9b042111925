// The CUDA backend's staging (class in backend_cuda_impl.h): the native input ring, the output
// staging slots, the pinned buffers, and the copy streams and events between them and the caller.
//
// Streams and copies. One compute stream (ctx.stream) runs every kernel in call order, so buffers
// that go back to a pool are reused safely by later work on it.
// Every output is converted on the compute stream into an output staging slot (o->ready marks
// that), and leaves it on an output copy stream; the compute stream waits for that copy
// (o->downloaded) before it writes the slot again. pipeline_depth() = 1 with either memory: the
// engine queues output t+1 before it writes t, so what write_output(t) waits for (or makes the
// caller's stream wait for) is the work queued one push earlier, while output t+1's network
// keeps the GPU busy.
//  - memory HOST: push copies the frame's colour rows into one of two pinned staging buffers (the
//    host waits only for the upload from two pushes ago), uploads them on an upload stream into
//    the frame's native ring slot (after the compute stream's last read of that slot, an event),
//    and the compute stream waits for the upload. queue_output downloads the output on the
//    output copy stream into its pinned buffer; write_output waits (sleeping, not spinning) for
//    that download only, then copies the colour samples into the caller's frame: uploads,
//    compute and downloads of two frames overlap. Only native bytes cross the bus (1.5 B per
//    pixel each way for yuv420p).
//  - memory CUDA: the caller's context is used as it is (no cudaSetDevice); push orders a
//    device-to-device copy of the frame's rows on the input copy stream, after the work queued on
//    the caller's stream (an event) and the slot's last read, and makes the compute stream and the
//    caller's stream wait for the copy only; write_output copies output t on the output copy
//    stream (staging slot -> caller's planes: cudaMemcpy2DAsync, or a bit-masked copy kernel for
//    planes that also hold alpha / padding / p010's low bits), after the caller's stream's work
//    queued before the pull and output t's own work (o->ready), and makes the caller's stream
//    wait for that copy only. No host synchronisation in the steady state, sigma=auto's included
//    (noise_source: the estimator's kernels follow the input copy, which follows the caller's
//    stream, which waits for output t-1 at most; the host reads their sums one push later, when
//    they are done in practice). With pipeline depth 0 the caller's stream would wait for the
//    network queued at the latest push, and the estimator's kernels behind it for the whole
//    queue.
#include "backend_cuda_impl.h"

namespace denoise {
namespace cuda {

int CudaBackend::new_out(Out **po) {
    std::unique_ptr<Out> o(new Out());
    int rc = cuda::dev_alloc(ctx_, (void **)&o->dev, (size_t)L_.bytes, "an output staging frame");
    if (rc) return rc;
    outs_.push_back(std::move(o));  // owned from here: the destructor frees what follows
    Out *q = outs_.back().get();
    if (host_)
        TRY(ck(cudaHostAlloc((void **)&q->pinned, (size_t)L_.bytes, cudaHostAllocDefault), "cudaHostAlloc (output staging)"));
    TRY(ck(cudaEventCreateWithFlags(&q->ready, cudaEventDisableTiming), "cudaEventCreate"));
    TRY(ck(cudaEventCreateWithFlags(&q->downloaded, host_ ? kHostWaitEvent : cudaEventDisableTiming), "cudaEventCreate"));
    TRY(ck(cudaEventRecord(q->downloaded, down_), "cudaEventRecord"));  // nothing has read it yet
    *po = q;
    return 0;
}

int CudaBackend::take_out(Out **po) {
    if (!free_outs_.empty()) {
        *po = free_outs_.back();
        free_outs_.pop_back();
        return 0;
    }
    for (;;) {
        int rc = new_out(po);
        if (rc != DENOISE_ENOMEM) return rc;
        const size_t before = plan_i_;
        if ((rc = fall_back(rc))) return rc;
        if (plan_i_ == before) return DENOISE_ENOMEM;
    }
}

// The free slot released longest ago (its last read was queued earliest), with one slot of
// slot_count() kept spare where the cap allows: a slot released at the latest push was last
// read by the work queued there (the tiled plan reads a frame until the last output of its
// window), and a copy into it would wait for all of that.
int CudaBackend::take_slot(Slot **ps) {
    if (free_slots_.size() >= 2 || (!free_slots_.empty() && (int64_t)slots_.size() >= slot_count())) {
        *ps = free_slots_.front();
        free_slots_.pop_front();
        return 0;
    }
    std::unique_ptr<Slot> s(new Slot());
    for (;;) {
        int rc = cuda::dev_alloc(ctx_, (void **)&s->nat, (size_t)L_.bytes, "a native frame of the input ring");
        if (!rc) break;
        if (rc != DENOISE_ENOMEM) return rc;
        if (!free_slots_.empty()) {  // no spare: the free one
            *ps = free_slots_.front();
            free_slots_.pop_front();
            return 0;
        }
        const size_t before = plan_i_;
        if ((rc = fall_back(rc))) return rc;
        if (plan_i_ == before) return DENOISE_ENOMEM;
    }
    slots_.push_back(std::move(s));  // owned from here: the destructor frees what follows
    Slot *q = slots_.back().get();
    TRY(ck(cudaEventCreateWithFlags(&q->ready, cudaEventDisableTiming), "cudaEventCreate"));
    TRY(ck(cudaEventCreateWithFlags(&q->released, cudaEventDisableTiming), "cudaEventCreate"));
    TRY(ck(cudaEventRecord(q->released, up_), "cudaEventRecord"));  // nothing has read it yet
    *ps = q;
    return 0;
}

int CudaBackend::upload(const DenoiseImage &in, Slot *s) {
    Pin &p = pins_[pin_next_];
    pin_next_ ^= 1;
    TRY(ck(cudaEventSynchronize(p.done), "cudaEventSynchronize (input staging)"));
    cuda::copy_to_compact(L_, in, p.host);
    TRY(ck(cudaStreamWaitEvent(up_, s->released, 0), "cudaStreamWaitEvent (input ring)"));
    TRY(ck(cudaMemcpyAsync(s->nat, p.host, (size_t)L_.bytes, cudaMemcpyHostToDevice, up_), "cudaMemcpyAsync (frame upload)"));
    TRY(ck(cudaEventRecord(p.done, up_), "cudaEventRecord"));
    TRY(ck(cudaEventRecord(s->ready, up_), "cudaEventRecord"));
    return ck(cudaStreamWaitEvent(ctx_.stream, s->ready, 0), "cudaStreamWaitEvent (frame upload)");
}

// On the input copy stream, not the compute stream: the copy then waits only for the frame's
// producer (the caller's stream) and the slot's last reader, and neither the caller's stream
// nor the noise estimator (which reads the copy) waits for the network work queued before it.
int CudaBackend::copy_in(const DenoiseImage &in, Slot *s) {
    cudaStream_t caller = (cudaStream_t)spec_.cuda_stream;
    TRY(ck(cudaEventRecord(caller_ev_, caller), "cudaEventRecord (caller's stream)"));
    TRY(ck(cudaStreamWaitEvent(up_, caller_ev_, 0), "cudaStreamWaitEvent (caller's stream)"));
    TRY(ck(cudaStreamWaitEvent(up_, s->released, 0), "cudaStreamWaitEvent (input ring)"));
    for (int i = 0; i < 4; ++i) {
        const cuda::PlaneLayout &pl = L_.plane[i];
        if (!pl.used) continue;
        TRY(ck(cudaMemcpy2DAsync(s->nat + pl.offset, (size_t)pl.pitch, in.data[i], (size_t)in.linesize[i],
                                 (size_t)pl.row_bytes, (size_t)pl.rows, cudaMemcpyDeviceToDevice, up_),
               "cudaMemcpy2DAsync (input frame)"));
    }
    TRY(ck(cudaEventRecord(s->ready, up_), "cudaEventRecord"));
    TRY(ck(cudaStreamWaitEvent(ctx_.stream, s->ready, 0), "cudaStreamWaitEvent (input copy)"));
    // the caller may reuse the frame once what it queues after this call runs
    return ck(cudaStreamWaitEvent(caller, s->ready, 0), "cudaStreamWaitEvent (caller's stream)");
}

// On the output copy stream, not the compute stream: the copy waits for the caller's stream
// (its earlier use of `out`) and output t's own work (o->ready), and the caller's stream then
// waits for the copy only, not for the network of output t+1 queued since.
int CudaBackend::copy_out(Out *o, const DenoiseImage &out) {
    cudaStream_t caller = (cudaStream_t)spec_.cuda_stream;
    TRY(ck(cudaEventRecord(caller_ev_, caller), "cudaEventRecord (caller's stream)"));
    TRY(ck(cudaStreamWaitEvent(down_, caller_ev_, 0), "cudaStreamWaitEvent (caller's stream)"));
    TRY(ck(cudaStreamWaitEvent(down_, o->ready, 0), "cudaStreamWaitEvent (output ready)"));
    for (int i = 0; i < 4; ++i) {
        const cuda::PlaneLayout &pl = L_.plane[i];
        if (!pl.used || !pl.covered) continue;
        TRY(ck(cudaMemcpy2DAsync(out.data[i], (size_t)out.linesize[i], o->dev + pl.offset, (size_t)pl.pitch,
                                 (size_t)pl.row_bytes, (size_t)pl.rows, cudaMemcpyDeviceToDevice, down_),
               "cudaMemcpy2DAsync (output frame)"));
    }
    // partially covered planes (p010's low bits, bgr0's padding byte): each word holding a
    // colour sample whole, its other bits the input's (o->dev is frame_out's output over the
    // input's words), so a fresh pool frame gets defined words; bytes outside the samples keep
    // the caller's (denoise.h, denoise_pull)
    if (L_.partial_planes)
        TRY(cuda::frame_copy_components(ctx_, cuda::compact_frame(L_, o->dev), cuda::image_frame(out), spec_.format,
                                        spec_.width, spec_.height, L_.partial_planes, true, down_));
    TRY(ck(cudaEventRecord(o->downloaded, down_), "cudaEventRecord (output copied)"));
    return ck(cudaStreamWaitEvent(caller, o->downloaded, 0), "cudaStreamWaitEvent (caller's stream)");
}

int CudaBackend::read_done(Slot *s) { return ck(cudaEventRecord(s->released, ctx_.stream), "cudaEventRecord (input ring read)"); }

}  // namespace cuda
}  // namespace denoise
