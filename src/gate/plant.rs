//! `--plant-defect SPEC` (a hidden gate flag): the negative control of `ppn-gate hunt
//! --self-check`. Where the gate's own flags match the corner SPEC names, the prime arm's
//! first judged logit has its lowest bit flipped before it is hashed and compared, so the
//! gate FAILs through its real comparison; everywhere else the flag changes nothing. The
//! hunt's generator is never told the corner: it must find it by search and shrink to it.
//!
//! SPEC: `stages=N,chunk=C[,batch>=B]`: the gate has exactly N stages and the prime arm
//! with C in its `--chunk` list as given (and, with the batch term, the batched arm with
//! `--batch` at least B).

use anyhow::{bail, Result};

use super::options::GateOptions;
use crate::runtime::placement::parse_list;

/// A planted corner of the configuration space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corner {
    pub stages: usize,
    pub batch_min: Option<usize>,
    pub chunk: usize,
}

impl Corner {
    /// The corner of a hunt seed: stages 2..=4 and a chunk of 3, 5 or 7 (each of the 9
    /// combinations once in any 9 consecutive seeds). Two dimensions and one value, so a
    /// random search meets it within a few dozen trials (one trial in about 30 on the
    /// built-in model); a batch term would make it one in several hundred.
    pub fn of_seed(seed: u64) -> Corner {
        let s = seed % 9;
        Corner {
            stages: 2 + (s % 3) as usize,
            batch_min: None,
            chunk: [3, 5, 7][(s / 3) as usize],
        }
    }

    pub fn parse(spec: &str) -> Result<Corner> {
        let bad = |why: &str| -> Result<Corner> {
            bail!("--plant-defect {spec:?}: {why} (expected stages=N,chunk=C[,batch>=B])")
        };
        let (mut stages, mut batch_min, mut chunk) = (None, None, None);
        for term in spec.split(',') {
            let term = term.trim();
            let (slot, v) = if let Some(v) = term.strip_prefix("stages=") {
                (&mut stages, v)
            } else if let Some(v) = term.strip_prefix("batch>=") {
                (&mut batch_min, v)
            } else if let Some(v) = term.strip_prefix("chunk=") {
                (&mut chunk, v)
            } else {
                return bad(&format!("unknown term {term:?}"));
            };
            match v.parse::<usize>() {
                Ok(n) if n >= 1 && slot.is_none() => *slot = Some(n),
                Ok(n) if n >= 1 => return bad(&format!("term {term:?} given twice")),
                _ => return bad(&format!("term {term:?}: need a whole number >= 1")),
            }
        }
        match (stages, batch_min, chunk) {
            (Some(stages), batch_min, Some(chunk)) => Ok(Corner {
                stages,
                batch_min,
                chunk,
            }),
            _ => bad("the stages and chunk terms are required"),
        }
    }

    /// Whether a gate's flags are in the corner (flags that do not parse are not: the gate
    /// names them itself).
    pub fn matches(&self, args: &GateOptions) -> bool {
        let arms: Vec<&str> = args.arms.split(',').map(str::trim).collect();
        let stages = args.stages.or_else(|| {
            args.devices
                .as_deref()
                .and_then(|d| parse_list("--devices", d).ok())
                .map(|d| d.len())
        });
        let chunks = args
            .chunk
            .as_deref()
            .and_then(|c| parse_list("--chunk", c).ok())
            .unwrap_or_default();
        stages.unwrap_or(1) == self.stages
            && self
                .batch_min
                .is_none_or(|b| arms.contains(&"batched") && args.batch() >= b)
            && arms.contains(&"prime")
            && chunks.contains(&self.chunk)
    }
}

impl std::fmt::Display for Corner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stages={},chunk={}", self.stages, self.chunk)?;
        match self.batch_min {
            Some(b) => write!(f, ",batch>={b}"),
            None => Ok(()),
        }
    }
}

/// Whether `--plant-defect` plants its flip in this gate (an unparsable SPEC: exit 2).
pub fn planted(args: &GateOptions) -> Result<bool> {
    match &args.plant_defect {
        None => Ok(false),
        Some(spec) => Ok(Corner::parse(spec)?.matches(args)),
    }
}

#[cfg(test)]
mod tests {
    use super::Corner;

    #[test]
    fn corners_round_trip_and_bad_specs_name_the_term() {
        for seed in 0..60 {
            let c = Corner::of_seed(seed);
            assert_eq!(Corner::parse(&c.to_string()).unwrap(), c);
            assert!((2..=4).contains(&c.stages) && [3, 5, 7].contains(&c.chunk));
        }
        let all: std::collections::BTreeSet<_> =
            (0..9).map(|s| Corner::of_seed(s).to_string()).collect();
        assert_eq!(all.len(), 9);
        let c = Corner {
            stages: 3,
            batch_min: Some(5),
            chunk: 7,
        };
        assert_eq!(c.to_string(), "stages=3,chunk=7,batch>=5");
        assert_eq!(Corner::parse("batch>=5,chunk=7,stages=3").unwrap(), c);
        for (spec, want) in [
            ("stages=3,batch>=5", "are required"),
            ("stages=3,batch>=5,chunk=x", "\"chunk=x\""),
            ("stages=0,batch>=5,chunk=7", "\"stages=0\""),
            ("stages=3,batch>=5,chunk=7,chunk=7", "twice"),
            ("window=3", "unknown term \"window=3\""),
        ] {
            let e = Corner::parse(spec).unwrap_err().to_string();
            assert!(
                e.contains(want) && e.contains("--plant-defect"),
                "{spec}: {e}"
            );
        }
    }
}
