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

// A step's row positions into the engine's RowPos buffer (one launch per POS_ROWS-row group).
// The host launches it WITHOUT programmatic dependent launch, so it starts only after every
// earlier operation of its stream has completed (write after read: the previous step's
// attention launches have finished reading the buffer). Its successors read the buffer only
// after their pdl_wait() (read after write). The value arrives by kernel parameter.
extern "C" __global__ void rowpos_set(RowPos* dst, RowPos v) {
    pdl_trigger();
    const u32* src = (const u32*)&v;
    u32* out = (u32*)dst;
    for (int i = threadIdx.x; i < (int)(sizeof(RowPos) / 4); i += blockDim.x) out[i] = src[i];
}
