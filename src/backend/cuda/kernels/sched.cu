// Schedule exploration (--jitter-us on the CUDA backend): a one-thread kernel that holds its
// stream for `ns` nanoseconds of the GPU's global timer. Enqueued with seeded random lengths
// before stream operations, it shifts how the streams interleave, so a missing event edge
// shows up as a FAIL far more often than under the GPU's natural timing. It touches no data.
extern "C" __global__ void spin(u64 ns) {
    u64 t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
