// GPU checks, CUDA graphs (kernels/cuda/frame_graph.h): the backend driven as engine.cpp drives it,
// whole frames, with graphs (the default) and with DENOISE_CUDA_GRAPH=0: every output byte equal,
// one graph launch per U-Net pass and per output after the first of each kind, and each of the
// two graphs instantiated once (every later frame updates it) (the check itself is in
// api_run.h: the alignment checks run it too). --quick: nothing.
// Exit: 0 all passed, 1 a check failed, 77 no usable GPU (nothing run).
#include "api_run.h"

using namespace gpu_check;

namespace {



}  // namespace

int main(int argc, char **argv) {
    return run_checks(argc, argv, [](cuda::Ctx &ctx, const Options &o) {
        (void)ctx;
        if (o.quick) return;
        timed("CUDA graphs", [&] { graph_check(o.api_weights()); });
    });
}
