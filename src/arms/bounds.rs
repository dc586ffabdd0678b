//! Bounds before work: what a gate's numeric flags size, checked against what bounds them
//! before anything is allocated. Positions against the model's context length
//! (`GateSpec::check_positions`, deterministic: `run_gate` checks it too); the bytes a run
//! implies (`GateSpec::footprint`), which the CLI holds against the host's free memory.
//! Every size is computed in u128 with saturating arithmetic: a product of hostile flags
//! reads as "more than any host has", never as an overflow panic or a wrapped small number.

use crate::model::Config;

use super::{ArmKind, GateSpec};

/// One part of a run's memory: what it is, its bytes (saturated at u128::MAX), and the
/// flags that size it (with their values), as an error names them.
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    pub what: &'static str,
    pub bytes: u128,
    pub flags: String,
}

/// A gate's memory by part, split by where it lives: `host` (every part on the CPU
/// backend; the reference logits, the readback buffers and the records on CUDA) and
/// `device` (the KV caches, the scratch and the logits slots on CUDA; empty on the CPU).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Footprint {
    pub host: Vec<Part>,
    pub device: Vec<Part>,
}

impl Footprint {
    pub fn host_bytes(&self) -> u128 {
        self.host
            .iter()
            .fold(0u128, |a, p| a.saturating_add(p.bytes))
    }
    pub fn device_bytes(&self) -> u128 {
        self.device
            .iter()
            .fold(0u128, |a, p| a.saturating_add(p.bytes))
    }
}

/// `a * b * ...` in u128, saturating.
fn prod(xs: &[usize]) -> u128 {
    xs.iter().fold(1u128, |a, &x| a.saturating_mul(x as u128))
}

/// Bytes as a person reads them: "3.2 GiB"; a saturated size reads "more than 10^38 bytes".
pub fn human(bytes: u128) -> String {
    if bytes == u128::MAX {
        return "more than 10^38 bytes".into();
    }
    if bytes >= 1 << 70 {
        return format!("{:.1e} bytes", bytes as f64);
    }
    const UNITS: [&str; 7] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Bytes the receipt and the judge keep per checked step (an `ArmStep`, its 64-hex-digit
/// hash, and its JSON in the written receipt), rounded up.
const RECORD_BYTES: usize = 256;

impl GateSpec {
    /// Steps every row runs, None when `--prompt-len + --gen-len` overflows (`steps()`
    /// saturates; `validate` refuses the overflow naming both flags).
    pub(super) fn steps_checked(&self) -> Option<usize> {
        match &self.tape {
            Some(t) => Some(t.len()),
            None => self.prompt_len.checked_add(self.gen_len),
        }
    }

    /// `ctx()` without wrapping: None when steps * (draft + 1) + 1 overflows.
    pub(super) fn ctx_checked(&self) -> Option<usize> {
        let steps = self.steps_checked()?;
        if self.arms.contains(&ArmKind::Verify) {
            steps
                .checked_mul(self.draft.checked_add(1)?)?
                .checked_add(1)
        } else {
            Some(steps)
        }
    }

    /// What sets the most rows one step carries (`max_rows`), in the flags' words.
    fn rows_flags(&self) -> String {
        let m = self.max_rows();
        let mut why = Vec::new();
        if self.arms.contains(&ArmKind::Batched) && self.batch == m {
            why.push(format!("--batch {}", self.batch));
        }
        if self.arms.contains(&ArmKind::Verify) && self.draft.saturating_add(1) == m {
            why.push(format!("--draft {} + 1", self.draft));
        }
        if self
            .arms
            .iter()
            .any(|a| matches!(a, ArmKind::Prime | ArmKind::Verify))
            && why.is_empty()
        {
            why.push(format!(
                "--chunk or the {}-position prompt",
                self.prime_len()
            ));
        }
        if why.is_empty() {
            format!("{m} rows a step")
        } else {
            format!("{m} rows a step: {}", why.join(", "))
        }
    }

    /// What sets the positions, in the flags' words.
    fn positions_flags(&self) -> String {
        match &self.tape {
            Some(t) => format!("--tape ({} tokens)", t.len()),
            None => format!(
                "--prompt-len {} + --gen-len {}",
                self.prompt_len, self.gen_len
            ),
        }
    }

    /// Every position a row walks (0..steps) must be one the model was trained for: at most
    /// its context length (`cfg.context_length`; 0, a file without the key, bounds nothing
    /// here: the memory bound still does). Verify's cache slots beyond the positions (room
    /// for rejected drafts, `ctx`) are memory, not positions: `footprint` counts them.
    pub fn check_positions(&self, cfg: &Config) -> Result<(), String> {
        let steps = self.steps_checked().ok_or_else(|| {
            format!(
                "{}: the position count overflows a usize",
                self.positions_flags()
            )
        })?;
        if cfg.context_length > 0 && steps > cfg.context_length {
            return Err(format!(
                "{} = {steps} positions: more than the model's context length {} ({}.context_length); at most {} positions",
                self.positions_flags(),
                cfg.context_length,
                cfg.arch,
                cfg.context_length
            ));
        }
        Ok(())
    }

    /// The memory the run implies, by part, from the flags and the model's shapes alone.
    /// `device_resident`: the backend keeps caches, scratch and logits slots in device
    /// memory (CUDA), so only the reference logits, readback buffers and records count
    /// against the host. `members`: processes of this gate on this host (`--procs W`:
    /// every member walks its own reference).
    pub fn footprint(&self, cfg: &Config, device_resident: bool, members: usize) -> Footprint {
        let steps = self.steps_checked().unwrap_or(usize::MAX);
        let ctx = self.ctx_checked().unwrap_or(usize::MAX);
        let rows = self.batch_rows();
        let max_rows = self.max_rows();
        let n_stages = self.placement.n_stages();
        let members = members.max(1);
        let (layers, kv, vocab) = (cfg.n_layers, cfg.kv_dim(), cfg.vocab);
        let pos = self.positions_flags();
        let batch = if self.arms.contains(&ArmKind::Batched) {
            format!(" x --batch {}", self.batch)
        } else {
            String::new()
        };
        let draft = if self.arms.contains(&ArmKind::Verify) {
            format!(" x (--draft {} + 1)", self.draft)
        } else {
            String::new()
        };
        let mut host = Vec::new();
        let mut device = Vec::new();
        // The reference: a one-row cache over every layer (dropped before the runtime under
        // test is built, counted anyway: an upper bound), and every step's logits of every
        // row kept to name a first divergent value (`run_reference`).
        let ref_cache = Part {
            what: "reference KV cache",
            bytes: prod(&[members, layers, 2, steps, kv, 4]),
            flags: pos.clone(),
        };
        let ref_logits = Part {
            what: "reference logits",
            bytes: prod(&[
                members,
                rows,
                steps,
                vocab.saturating_mul(4).saturating_add(RECORD_BYTES),
            ]),
            flags: format!("{pos}{batch}"),
        };
        // The runtime under test: every layer's K and V for `rows` sequences of `ctx` slots
        // (verify: room for every rejected draft).
        let cache = Part {
            what: "KV cache",
            bytes: prod(&[layers, 2, self.max_seqs(), ctx, kv, 4]),
            flags: format!("{pos}{draft}{batch}"),
        };
        // Logits: `window` output slots of max_rows x vocab, each with a readback twin, plus
        // the reference's one slot.
        let slots = self.window.max(1).saturating_add(1);
        let logits_dev = Part {
            what: "logits slots",
            bytes: prod(&[slots, max_rows, vocab, 4]),
            flags: format!("--window {} x {}", self.window, self.rows_flags()),
        };
        let logits_rb = Part {
            what: "readback buffers",
            bytes: prod(&[slots, max_rows, vocab, 4]),
            flags: logits_dev.flags.clone(),
        };
        // Per stage a forward's working set over max_rows rows (activations, q/k/v, the FFN,
        // attention over the cache), plus the boundaries' double buffers.
        let per_row = cfg
            .n_embd
            .saturating_mul(6)
            .saturating_add(cfg.q_dim().saturating_mul(2))
            .saturating_add(kv.saturating_mul(2))
            .saturating_add(cfg.n_ff.saturating_mul(2));
        let scratch = Part {
            what: "scratch",
            bytes: prod(&[n_stages, max_rows, per_row, 4]).saturating_add(prod(&[
                n_stages,
                cfg.n_heads,
                ctx,
                4,
            ])),
            flags: format!("--stages {n_stages} x {}", self.rows_flags()),
        };
        // The records: a hash (and its receipt JSON) per checked step, per arm; the prime
        // arm's plan and checks are per chunk size and repeat.
        let mut checked = 0u128;
        for &a in &self.arms {
            let n = match a {
                ArmKind::Eager | ArmKind::Pipelined => prod(&[steps]),
                ArmKind::Batched => prod(&[rows, steps]),
                ArmKind::Prime => prod(&[self.prime_chunks().len(), self.repeat, steps]),
                // A round per accepted prefix at worst one per position, with its drafts.
                ArmKind::Verify => prod(&[steps, self.draft.saturating_add(2)]),
                ArmKind::Serve => prod(&[self.serve.requests, steps]),
            };
            checked = checked.saturating_add(n);
        }
        let records = Part {
            what: "step records",
            bytes: checked.saturating_mul(RECORD_BYTES as u128),
            flags: if self.arms.contains(&ArmKind::Prime) {
                format!(
                    "{pos} x --repeat {} x {} chunk sizes",
                    self.repeat,
                    self.prime_chunks().len()
                )
            } else {
                format!("{pos} per arm")
            },
        };
        host.push(ref_logits);
        if self.arms.contains(&ArmKind::Serve) {
            // Every request's reference logits, at most prompt + generated positions each.
            host.push(Part {
                what: "serve reference logits",
                bytes: prod(&[
                    members,
                    self.serve.requests,
                    steps,
                    vocab.saturating_mul(4).saturating_add(RECORD_BYTES),
                ]),
                flags: format!("{pos} x --requests {}", self.serve.requests),
            });
        }
        host.push(records);
        host.push(logits_rb);
        for p in [ref_cache, cache, logits_dev, scratch] {
            if device_resident {
                device.push(p);
            } else {
                host.push(p);
            }
        }
        let by_size = |v: &mut Vec<Part>| v.sort_by_key(|p| std::cmp::Reverse(p.bytes));
        by_size(&mut host);
        by_size(&mut device);
        Footprint { host, device }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{Placement, TransportChoice};

    fn spec(arms: &[ArmKind]) -> GateSpec {
        GateSpec {
            placement: Placement::from_flags(
                8,
                Some(2),
                None,
                None,
                TransportChoice::Auto,
                8,
                &|_, _| false,
            )
            .unwrap(),
            arms: arms.to_vec(),
            window: 3,
            batch: 3,
            prompt_len: 8,
            gen_len: 16,
            seed: 0,
            topk: 8,
            tape: None,
            faults: vec![],
            chunks: None,
            repeat: 3,
            draft: 4,
            serve: crate::arms::serve::ServeSpec {
                requests: 12,
                max_rows: 8,
                prefill_chunk: 4,
            },
            dist: None,
            planted: false,
        }
    }

    /// The built-in model's config (built as `cli` builds it, from the layers below).
    fn cfg() -> Config {
        // The built-in model (as `--model` left out loads it), built here below the gate layer.
        let bytes = crate::model::synth::synth_gguf(&crate::model::synth::builtin_spec()).unwrap();
        let f = crate::gguf::GgufFile::parse(bytes).unwrap();
        crate::model::Model::load(&f).unwrap().cfg.clone()
    }

    /// The KV cache part is exactly layers x 2 x rows x ctx x kv_dim x 4, with verify's
    /// slots; saturation, never a panic, for hostile products.
    #[test]
    fn footprint_sizes_the_cache_exactly_and_saturates() {
        let c = cfg();
        let s = spec(&[ArmKind::Batched, ArmKind::Verify]);
        let f = s.footprint(&c, false, 1);
        let cache = f.host.iter().find(|p| p.what == "KV cache").unwrap();
        let ctx = 24 * 5 + 1;
        assert_eq!(
            cache.bytes,
            (c.n_layers * 2 * 3 * ctx * c.kv_dim() * 4) as u128
        );
        assert!(cache.flags.contains("--draft 4") && cache.flags.contains("--batch 3"));
        assert!(f.device.is_empty());
        // On a device-resident backend the cache leaves the host's count.
        let g = s.footprint(&c, true, 1);
        assert!(g.host.iter().all(|p| p.what != "KV cache"));
        assert!(g.host_bytes() < f.host_bytes());
        let mut h = spec(&[ArmKind::Verify, ArmKind::Prime]);
        h.gen_len = usize::MAX;
        h.draft = usize::MAX;
        h.repeat = usize::MAX;
        assert_eq!(h.ctx_checked(), None);
        assert_eq!(h.footprint(&c, false, 1).host_bytes(), u128::MAX);
        assert_eq!(human(u128::MAX), "more than 10^38 bytes");
        assert_eq!(human(3 << 30), "3.0 GiB");
        assert_eq!(human(100), "100 bytes");
    }

    /// Positions past the context length are refused naming the flags and the limit; a
    /// model without a context length bounds nothing here; an overflow is named.
    #[test]
    fn positions_are_held_to_the_context_length() {
        let mut c = cfg();
        assert!(
            c.context_length > 0,
            "the built-in model carries a context length"
        );
        let mut s = spec(&[ArmKind::Eager]);
        s.gen_len = c.context_length - s.prompt_len;
        s.check_positions(&c).unwrap();
        s.gen_len += 1;
        let e = s.check_positions(&c).unwrap_err();
        assert!(
            e.contains("--gen-len") && e.contains(&c.context_length.to_string()),
            "{e}"
        );
        s.gen_len = usize::MAX;
        assert!(s.check_positions(&c).unwrap_err().contains("overflows"));
        s.gen_len = 1 << 40;
        c.context_length = 0;
        s.check_positions(&c).unwrap();
        s.tape = Some(vec![1; 10]);
        c.context_length = 9;
        assert!(s
            .check_positions(&c)
            .unwrap_err()
            .contains("--tape (10 tokens)"));
    }
}
