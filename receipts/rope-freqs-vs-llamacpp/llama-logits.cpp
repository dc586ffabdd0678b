// llama-logits: llama.cpp's logits for a prompt and its greedy continuation, written in the
// oracle file format (tests/data/oracle/synth/README.md: tape, steps[i].top_ids/top_logits),
// so that `ppn-gate --tape OUT.json --topk 20` and scripts/oracle-compare.py compare ppn-gate
// with llama.cpp exactly as they compare it with HF transformers.
//
// Our code against llama.cpp's public C API (include/llama.h); no llama.cpp code is copied.
// Built and run by receipts/rope-freqs/run.sh.
//
//   llama-logits MODEL.gguf PROMPT_IDS GEN_LEN OUT.json     (PROMPT_IDS: comma-separated)
//
// Settings chosen so that llama.cpp computes in f32 wherever it can: CPU only, K and V cache
// in F32 (the default is F16), flash attention off, one thread, one token per decode call.
// With F32 weights every matmul is then an f32 dot (ggml quantizes activations only for
// quantized weights).
#include "llama.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

static void quiet(enum ggml_log_level level, const char* text, void*) {
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int fail(const char* what) {
    fprintf(stderr, "llama-logits: %s\n", what);
    return 2;
}

int main(int argc, char** argv) {
    if (argc != 5) return fail("usage: llama-logits MODEL.gguf PROMPT_IDS GEN_LEN OUT.json");
    std::vector<llama_token> tape;
    for (std::string s = argv[2]; !s.empty();) {
        size_t c = s.find(',');
        tape.push_back((llama_token)std::stol(s.substr(0, c)));
        s = c == std::string::npos ? "" : s.substr(c + 1);
    }
    const size_t prompt_len = tape.size();
    const size_t gen_len = (size_t)std::atoi(argv[3]);
    if (prompt_len == 0) return fail("empty prompt");

    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model* model = llama_model_load_from_file(argv[1], mp);
    if (!model) return fail("llama.cpp refused the model");
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 256;
    cp.n_ubatch = 256;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) return fail("llama.cpp could not create a context");
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    FILE* out = fopen(argv[4], "w");
    if (!out) return fail("cannot write the output file");
    std::string steps;
    std::vector<int> idx(n_vocab);
    // Teacher-forced: position i feeds tape[i]; past the prompt the tape grows by the argmax.
    for (size_t i = 0; i < prompt_len + gen_len; i++) {
        llama_token t = tape[i];
        if (llama_decode(ctx, llama_batch_get_one(&t, 1)) != 0) return fail("llama_decode failed");
        const float* lg = llama_get_logits_ith(ctx, -1);
        std::iota(idx.begin(), idx.end(), 0);
        // Descending logit, ties by ascending id (the receipts' top-k order).
        std::partial_sort(idx.begin(), idx.begin() + 20, idx.end(), [&](int a, int b) {
            return lg[a] != lg[b] ? lg[a] > lg[b] : a < b;
        });
        char buf[64];
        std::string ids, logits;
        for (int k = 0; k < 20; k++) {
            snprintf(buf, sizeof buf, "%s%d", k ? ", " : "", idx[k]);
            ids += buf;
            snprintf(buf, sizeof buf, "%s%.9g", k ? ", " : "", lg[idx[k]]);
            logits += buf;
        }
        steps += std::string(i ? ",\n" : "") + "  {\"top_ids\": [" + ids + "], \"top_logits\": [" +
                 logits + "]}";
        if (i + 1 == tape.size() && tape.size() < prompt_len + gen_len) tape.push_back(idx[0]);
    }
    std::string tape_s;
    for (size_t i = 0; i < tape.size(); i++) tape_s += (i ? ", " : "") + std::to_string(tape[i]);
    fprintf(out,
            "{\"reference\": \"llama.cpp (CPU, f32 KV cache, flash attention off, 1 thread)\",\n"
            " \"vocab\": %d, \"prompt_len\": %zu, \"gen_len\": %zu,\n \"tape\": [%s],\n"
            " \"steps\": [\n%s]}\n",
            n_vocab, prompt_len, gen_len, tape_s.c_str(), steps.c_str());
    fclose(out);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
