//! The backend registry: every backend a gate can run on, as one enum (enum dispatch keeps
//! the runtime generic and monomorphic: `arms::run_gate` is instantiated per arm of it).
//! What a command opens from its options is the gate layer's (`gate::plan::open_backend`).

use std::sync::Arc;

use anyhow::{Context, Result};

use super::cpu::CpuBackend;
use super::cuda::CudaBackend;
use super::trace::Tracer;
use super::Backend;
use crate::receipt::ModuleStats;

/// The backend a gate runs on (enum dispatch keeps the runtime generic and monomorphic).
#[derive(Clone)]
pub enum AnyBackend {
    Cpu(Arc<CpuBackend>),
    Cuda(Arc<CudaBackend>),
}

impl AnyBackend {
    pub fn device_count(&self) -> usize {
        match self {
            AnyBackend::Cpu(b) => b.device_count(),
            AnyBackend::Cuda(b) => b.device_count(),
        }
    }
    pub fn shares_host_weights(&self) -> bool {
        match self {
            AnyBackend::Cpu(b) => b.shares_host_weights(),
            AnyBackend::Cuda(b) => b.shares_host_weights(),
        }
    }
    pub fn peer_ok(&self, a: usize, b: usize) -> bool {
        match self {
            AnyBackend::Cpu(be) => be.peer_ok(a, b),
            AnyBackend::Cuda(be) => be.peer_ok(a, b),
        }
    }
    pub fn kind(&self) -> &'static str {
        match self {
            AnyBackend::Cpu(b) => b.kind(),
            AnyBackend::Cuda(b) => b.kind(),
        }
    }
    pub fn device_name(&self, d: usize) -> String {
        match self {
            AnyBackend::Cpu(b) => b.device_name(d),
            AnyBackend::Cuda(b) => b.device_name(d),
        }
    }
    /// Tracing: streams made from now on record into a fresh trace.
    pub fn start_trace(&self) {
        match self {
            AnyBackend::Cpu(b) => b.start_trace(),
            AnyBackend::Cuda(b) => b.start_trace(),
        };
    }
    /// The current trace, its times read (after the traced walks).
    pub fn trace(&self) -> Result<Option<Arc<Tracer>>> {
        match self {
            AnyBackend::Cpu(b) => b.trace(),
            AnyBackend::Cuda(b) => b.trace(),
        }
        .context("reading the trace")
    }
    /// The kernel-module counters so far (None: the backend compiles no kernels).
    pub fn module_stats(&self) -> Option<ModuleStats> {
        match self {
            AnyBackend::Cpu(_) => None,
            AnyBackend::Cuda(b) => Some(b.module_stats()),
        }
    }
}
