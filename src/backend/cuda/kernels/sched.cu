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

// Forced fault holds (`--fault`, Backend::hold_until_next): the stream that runs `hold_wait`
// stops, in stream order, until the event's NEXT record has run on its own stream (that record
// is followed by `hold_put`, which stores its generation into `word`, pinned host memory mapped
// into every device), or until `ns` nanoseconds of the global timer have passed: a record that
// never comes costs the limit, never a deadlock. One thread, so the SMs stay free for the
// stream it waits for. The store is a release and the load an acquire at system scope, so the
// held stream's next operation sees what the recording stream had completed before the record.
// Generations count up from 1 in host order; the wait ends once the word reaches `gen`.
extern "C" __global__ void hold_wait(const u32* word, u32 gen, u64 ns) {
    u64 t0, t;
    u32 v;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (;;) {
        asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(word) : "memory");
        if (v >= gen) break;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (t - t0 >= ns) break;
        __nanosleep(500);
    }
}

extern "C" __global__ void hold_put(u32* word, u32 gen) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(word), "r"(gen) : "memory");
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
