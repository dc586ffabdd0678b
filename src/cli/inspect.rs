//! `ppn-gate inspect`: a GGUF file's architecture, shapes, tensor types and metadata.

use std::path::Path;

use anyhow::{Context, Result};

use crate::exit::EXIT_PASS;
use crate::gguf::GgufFile;
use crate::model::Model;

pub fn inspect(file: &Path, tensors: bool) -> Result<i32> {
    crate::gate::bounds::hold_model_path(&format!("inspect {}", file.display()), file)?;
    let f = GgufFile::open(file).with_context(|| format!("inspect {}", file.display()))?;
    outln!(
        "file: {} (GGUF v{}, {} bytes)",
        file.display(),
        f.version,
        f.bytes().len()
    );
    outln!("alignment: {}, data offset: {}", f.alignment, f.data_offset);
    match Model::load(&f) {
        Ok(m) => {
            let c = &m.cfg;
            outln!(
                "architecture: {} — {} layers, n_embd {}, heads {} (kv {}), head_dim {}, ff {}, vocab {}",
                c.arch, c.n_layers, c.n_embd, c.n_heads, c.n_kv_heads, c.head_dim, c.n_ff, c.vocab
            );
            outln!("weight bytes: {}", m.weight_bytes);
            // Said before a GPU is asked: the CUDA kernels' shape limits (the CPU runs any).
            match crate::backend::cuda::cuda_can_run(c) {
                Ok(()) => outln!("cuda backend: its kernels take this shape"),
                Err(e) => outln!("cuda backend: cannot run this model: {e}"),
            }
        }
        Err(e) => outln!("architecture: not loadable as a supported model: {e}"),
    }
    let mut by_type: std::collections::BTreeMap<String, (usize, u64)> = Default::default();
    for t in &f.tensors {
        let e = by_type.entry(t.ty.name().to_string()).or_default();
        e.0 += 1;
        e.1 += t.n_bytes;
    }
    outln!("tensors: {}", f.tensors.len());
    for (ty, (n, b)) in &by_type {
        outln!("  {ty:<6} {n:>5} tensors {b:>12} bytes");
    }
    outln!("metadata ({} keys):", f.metadata.len());
    for (k, v) in &f.metadata {
        outln!("  {k} = {}", short_value(v));
    }
    if tensors {
        for t in &f.tensors {
            outln!(
                "  {:<40} {:<6} {:?} {} bytes @ {}",
                t.name,
                t.ty.name(),
                t.dims,
                t.n_bytes,
                t.offset
            );
        }
    }
    Ok(EXIT_PASS)
}

fn short_value(v: &crate::gguf::Value) -> String {
    use crate::gguf::Value;
    match v {
        Value::Array(_, items) if items.len() > 8 => {
            format!(
                "[{} items: {}, ...]",
                items.len(),
                items[..3]
                    .iter()
                    .map(short_value)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
        Value::Array(_, items) => format!(
            "[{}]",
            items.iter().map(short_value).collect::<Vec<_>>().join(", ")
        ),
        Value::String(s) if s.len() > 80 => format!(
            "{:?}...",
            &s[..s.char_indices().nth(77).map(|x| x.0).unwrap_or(s.len())]
        ),
        Value::String(s) => format!("{s:?}"),
        other => format!("{other:?}")
            .split('(')
            .nth(1)
            .map(|x| x.trim_end_matches(')').to_string())
            .unwrap_or_default(),
    }
}
