//! Building a runtime: every stage's stream, engine (weights and scratch) and cache, born
//! on the stage's own stream; the boundary slots and their events; the input and output
//! rings; the link into this process's first stage; and the load barrier that closes the
//! build (see the module's ordering diagram).

use std::sync::{Arc, Mutex};

use super::{
    at, Boundary, Fault, InSlot, OutSlot, RResult, RtError, Runtime, RuntimeConfig, RxLink, Slot,
    Stage, Transport, WalkState,
};
use crate::backend::{Backend, EngineSpec};
use crate::model::Model;

impl<B: Backend> Runtime<B> {
    pub fn build(be: Arc<B>, model: Arc<Model>, cfg: RuntimeConfig) -> RResult<Runtime<B>> {
        let p = &cfg.placement;
        let n = p.n_stages();
        if n == 0 || p.n_layers() != model.cfg.n_layers {
            return Err(RtError::Misuse(format!(
                "placement covers {} layers in {n} stages, model has {}",
                p.n_layers(),
                model.cfg.n_layers
            )));
        }
        if cfg.max_rows == 0 || cfg.ctx == 0 || cfg.max_seqs == 0 || cfg.max_seqs > cfg.max_rows {
            return Err(RtError::Misuse(format!(
                "max_rows {}, max_seqs {} and ctx {} must be positive, max_seqs <= max_rows",
                cfg.max_rows, cfg.max_seqs, cfg.ctx
            )));
        }
        let vocab = model.cfg.vocab;
        let (lo, hi) = match &cfg.dist {
            None => (0, n),
            Some(d) => (d.local.start, d.local.end),
        };
        if lo >= hi || hi > n {
            return Err(RtError::Misuse(format!(
                "this process holds stages {lo}..{hi} of {n}"
            )));
        }
        if let Some(d) = &cfg.dist {
            if d.recv.is_some() != (lo > 0) || d.send.is_some() != (hi < n) {
                return Err(RtError::Misuse(format!(
                    "stages {lo}..{hi} of {n}: links given (recv {}, send {}) do not match the range",
                    d.recv.is_some(),
                    d.send.is_some()
                )));
            }
        }
        // This process's first and last stages' devices: the caller stream (input ring) and
        // the readback stream (output ring) live there.
        let dev0 = p.devices[lo];
        let dev_last = p.devices[hi - 1];
        let caller = at(be.new_stream(dev0, "caller"), || {
            format!("caller stream on device {dev0}")
        })?;
        let readback = at(be.new_stream(dev_last, "readback"), || {
            format!("readback stream on device {dev_last}")
        })?;

        let no_load_barrier = cfg.faults.contains(&Fault::NoLoadBarrier);
        let mut stages = Vec::with_capacity(hi - lo);
        let mut engines = Vec::with_capacity(hi - lo);
        for s in lo..hi {
            let dev = p.devices[s];
            let ctx = || format!("stage {s} (device {dev}) build");
            let stream = at(be.new_stream(dev, &format!("stage{s}")), ctx)?;
            // Weights and scratch go through the owning stage's engine, on its stream:
            // the embedding with stage 0, output norm + head with the last stage.
            let mut spec = EngineSpec {
                stage: s,
                layers: p.layers(s),
                embed: s == 0,
                head: s == n - 1,
                max_rows: cfg.max_rows,
                fault_mma_row_order: cfg.faults.contains(&Fault::MmaRowOrder),
                fault_row_count_order: cfg.faults.contains(&Fault::RowCountOrder),
            };
            if s == 0 && cfg.faults.contains(&Fault::SharedScratch) {
                // The fault's setup: stage 0's engine holds the whole model, and every
                // stage drives it (see `Runtime::engine`).
                spec = EngineSpec {
                    layers: 0..p.n_layers(),
                    head: true,
                    ..spec
                };
            }
            // Weights and scratch load through the stage's own engine ON ITS OWN STREAM, and
            // the cache is born there too: both are ordered before the stage's first op by
            // the stream itself. `--fault no-load-barrier` loads them on a separate loader
            // stream (an asynchronous loader, as the seed's) and skips the load barrier, the
            // only edge that orders such a load before the stages.
            let loader = if no_load_barrier {
                Some(at(be.new_stream(dev, &format!("loader{s}")), ctx)?)
            } else {
                None
            };
            let load = loader.as_ref().unwrap_or(&stream);
            let eng = at(be.new_engine(dev, &model, spec, load), ctx)?;
            // `--fault misplaced-cache`: the last stage's cache is born on stage 0's device,
            // zero-filled on the caller stream (which lives there; the load barrier orders it
            // before the first step).
            let misplace = s + 1 == n && n > 1 && cfg.faults.contains(&Fault::MisplacedCache);
            let (cdev, cs) = if misplace {
                (dev0, &caller)
            } else {
                (dev, load)
            };
            let cache = at(
                be.new_cache(cdev, &model, p.layers(s), cfg.max_seqs, cfg.ctx, cs),
                ctx,
            )?;
            let exit = at(be.new_event(dev), ctx)?;
            stages.push(Stage {
                dev,
                stream,
                cache,
                exit,
                _loader: loader,
            });
            engines.push(eng);
        }

        let mut bounds = Vec::with_capacity(hi - lo - 1);
        for b in lo..hi - 1 {
            let (txd, rxd) = (p.devices[b], p.devices[b + 1]);
            let ctx = || format!("boundary {b} (device {txd} -> device {rxd}) build");
            if p.transports[b] == Transport::Peer {
                at(be.enable_peer(txd, rxd), ctx)?;
            }
            let mk = || -> RResult<Slot<B>> {
                Ok(Slot {
                    buf: None,
                    ev_tx: at(be.new_event(txd), ctx)?,
                    ev_rx: at(be.new_event(rxd), ctx)?,
                    ev_grown: at(be.new_event(rxd), ctx)?,
                    staging: None,
                })
            };
            let slots = [mk()?, mk()?];
            bounds.push(Boundary {
                transport: p.transports[b],
                slots,
            });
        }

        let mk_in = || -> RResult<InSlot<B>> {
            let ctx = || format!("input ring on device {dev0}");
            Ok(InSlot {
                buf: at(be.alloc_zeroed(dev0, cfg.max_rows, &caller), ctx)?,
                ready: at(be.new_event(dev0), ctx)?,
                consumed: at(be.new_event(dev0), ctx)?,
            })
        };
        let inputs = [mk_in()?, mk_in()?];
        let out_len = cfg.max_rows.checked_mul(vocab).ok_or_else(|| {
            RtError::Misuse(format!(
                "output slot of max_rows {} x vocab {vocab} overflows",
                cfg.max_rows
            ))
        })?;
        let mut outputs = Vec::new();
        for _ in 0..cfg.window.max(1) {
            let ctx = || format!("output ring on device {dev_last}");
            let (buf, host) = if hi == n {
                (
                    Some(at(
                        be.alloc_zeroed(dev_last, out_len, &stages[hi - 1 - lo].stream),
                        ctx,
                    )?),
                    Some(at(be.alloc_readback(dev_last, out_len), ctx)?),
                )
            } else {
                (None, None)
            };
            outputs.push(OutSlot {
                buf,
                host,
                done: at(be.new_event(dev_last), ctx)?,
                read_caller: at(be.new_event(dev0), ctx)?,
                read_rb: at(be.new_event(dev_last), ctx)?,
                unread: None,
            });
        }
        let lens = vec![vec![0; cfg.max_seqs]; n];
        // The link into stage lo: its own stream, its double buffer born (zero-filled) on that
        // stream at full size (no growth across a process boundary), ordered before the
        // first step by the load barrier.
        let rx_link = match cfg.dist.as_ref().and_then(|d| d.recv.clone()) {
            None => None,
            Some(link) => {
                let ctx = || {
                    format!(
                        "boundary {} link RX (stage {lo}, device {dev0}) build",
                        lo - 1
                    )
                };
                let n_vals = cfg.max_rows * model.cfg.n_embd;
                let stream = at(be.new_stream(dev0, &format!("link{}", lo - 1)), ctx)?;
                let mk_buf = || at(be.alloc_zeroed(dev0, n_vals, &stream), ctx);
                let mk_ev = || at(be.new_event(dev0), ctx);
                Some(RxLink {
                    link,
                    bufs: [mk_buf()?, mk_buf()?],
                    arrived: [mk_ev()?, mk_ev()?],
                    consumed: [mk_ev()?, mk_ev()?],
                    stream,
                })
            }
        };
        let max_rows = cfg.max_rows;
        let rt = Runtime {
            be,
            model,
            cfg,
            lo,
            hi,
            stages,
            engines,
            rx_link,
            caller,
            readback,
            state: Mutex::new(WalkState {
                bounds,
                inputs,
                outputs,
                step: 0,
                lens,
                rows_at: Vec::new(),
                tokens_f32: Vec::with_capacity(max_rows),
                retired: Vec::new(),
            }),
        };
        // LOAD BARRIER: one host sync over every stream at build end, never per step. With
        // each stage loading on its own stream it is belt and braces (the caller and
        // readback streams read nothing loaded); with a separate loader stream it is the only
        // edge, which is what `--fault no-load-barrier` removes.
        if !no_load_barrier {
            rt.barrier("load barrier")?;
        }
        Ok(rt)
    }
}
