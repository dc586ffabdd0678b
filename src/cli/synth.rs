//! `ppn-gate synth`: a synthetic model with seeded weights, byte-identical for the same
//! flags, checked loadable before it is written.

use std::time::Instant;

use anyhow::{anyhow, Context, Result};

use super::SynthArgs;
use crate::exit::EXIT_PASS;
use crate::gate::bounds::{synth_bytes, synth_memory};
use crate::gate::plan::spec_flags;
use crate::gguf::GgufFile;
use crate::model::synth::{
    builtin_spec, preset, synth_gguf_for_tools, Preset, SynthQuant, SynthSpec, PRESETS,
};
use crate::model::{Arch, Model};
use crate::receipt;
use crate::term::Bar;

/// Every flag that sizes the model's bytes, with its value as used (a preset's where the
/// flag is left out), for a size error: the shape, `--head-dim` where given (it widens q
/// and kv past embd / heads; left out, the width is embd and heads, named already),
/// `--tied` where given (no output matrix) and the quant (bytes per weight).
fn shape_words(spec: &SynthSpec) -> String {
    let mut w = format!(
        "--layers {} --embd {} --heads {} --kv-heads {} --ff {} --vocab {}",
        spec.layers, spec.embd, spec.heads, spec.kv_heads, spec.ff, spec.vocab
    );
    if let Some(hd) = spec.head_dim {
        w += &format!(" --head-dim {hd}");
    }
    // A tied model writes one vocab x embd matrix fewer: the size named is of that file.
    if spec.tied {
        w += " --tied";
    }
    w + &format!(" --quant {}", spec.quant)
}

pub fn synth(a: &SynthArgs) -> Result<i32> {
    // The output path before any work (a big preset takes seconds to build): a directory,
    // a parent that is a file, an unwritable place are refused at once.
    crate::fsio::check_writable("-o", &a.output)?;
    // Not into the --out of a soak, battery or hunt that still runs.
    crate::fsio::check_distinct(&[("-o", a.output.as_path())], &[])?;
    let arch = match a.arch.as_deref() {
        None => None,
        Some(name) => Some(Arch::from_name(name).ok_or_else(|| {
            anyhow!(
                "--arch {name:?}: expected one of {}",
                Arch::ALL.map(|a| a.name()).join(", ")
            )
        })?),
    };
    let quant = SynthQuant::from_name(&a.quant).ok_or_else(|| {
        anyhow!(
            "--quant {:?}: unknown type (one of {})",
            a.quant,
            SynthQuant::names()
        )
    })?;
    let base = builtin_spec();
    let p = match a.preset.as_deref() {
        None => None,
        Some(name) => Some(preset(name).ok_or_else(|| {
            anyhow!(
                "--preset {name:?}: unknown (one of {})",
                PRESETS.map(|p| p.name).join(", ")
            )
        })?),
    };
    let pick = |flag: Option<usize>, of_preset: fn(&Preset) -> usize, builtin: usize| {
        flag.or(p.as_ref().map(of_preset)).unwrap_or(builtin)
    };
    let spec = SynthSpec {
        arch: arch.or(p.map(|p| p.arch)).unwrap_or(Arch::Llama),
        layers: pick(a.layers, |p| p.layers, base.layers),
        embd: pick(a.embd, |p| p.embd, base.embd),
        heads: pick(a.heads, |p| p.heads, base.heads),
        kv_heads: pick(a.kv_heads, |p| p.kv_heads, base.kv_heads),
        ff: pick(a.ff, |p| p.ff, base.ff),
        vocab: pick(a.vocab, |p| p.vocab, base.vocab),
        quant,
        seed: a.seed,
        head_dim: a.head_dim,
        tied: a.tied,
        rope_freqs: a.rope_freqs,
        sliding_window: a.sliding_window,
    };
    // Bounds before work: the model's bytes against the host's free memory (saturating: a
    // hostile shape reads as too large; the shape's own rules are synth's, checked next).
    synth_memory(synth_bytes(&spec), &shape_words(&spec))?;
    let t0 = Instant::now();
    // On a terminal: the three phases, the clock moving through each (a large model's
    // weights take seconds); dropped (so cleared) on an error's return too.
    let bar = Bar::new("synth", 3, "phases");
    bar.set_message("seeded weights");
    let bytes = synth_gguf_for_tools(&spec)?;
    // Load what we wrote before declaring success: a synth that writes an unloadable file
    // would only fail later, far from its cause.
    bar.inc();
    bar.set_message("load check");
    let f = GgufFile::parse(bytes).context("re-reading the synthetic model")?;
    let m = Model::load(&f).context("loading the synthetic model")?;
    let bytes = f.bytes();
    bar.inc();
    bar.set_message(format!("writing {} bytes", bytes.len()));
    receipt::write_atomic(&a.output, bytes)
        .with_context(|| format!("writing {}", a.output.display()))?;
    bar.finish();
    outln!(
        "wrote {} ({} bytes, blake3 {}) in {:.1} s: {}",
        a.output.display(),
        bytes.len(),
        m.file_blake3,
        t0.elapsed().as_secs_f64(),
        spec_flags(&spec)
    );
    Ok(EXIT_PASS)
}
