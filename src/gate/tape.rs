//! A token tape (`--tape`): its file read and bounded, and the one rule for row 0's prompt
//! (a tape's own `prompt_len`, else `--prompt-len`).

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};

use super::options::GateOptions;

/// The largest tape file read (a token id takes a few bytes of JSON, so this is millions
/// of positions, far past any model's context; an oracle tape's per-step top-k fits many
/// thousand steps). Checked before the file is parsed, so a huge or endless file (a device,
/// a FIFO) costs no more than this much memory.
pub const TAPE_MAX_BYTES: u64 = 16 << 20;

/// The prompt length when neither a tape's `prompt_len` nor `--prompt-len` gives one.
pub const DEFAULT_PROMPT_LEN: usize = 8;

/// A token tape as read from its file: row 0's tokens and, when the file says, how many of
/// them are the prompt. Its bounds against a model (vocab, context length): `check_tape`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tape {
    pub tokens: Vec<u32>,
    pub prompt_len: Option<usize>,
}

/// The fields a tape file may hold: the tokens (`tokens` or `tape`) and `prompt_len`, and
/// what an oracle tape (tests/data/oracle) adds beside them (ORACLE_FIELDS), which the gate
/// does not read but `gen_len` (any tokens gate a runtime: a tape made for another model,
/// whose `vocab` and `model_*` differ, is a valid input). Any other field is refused: a
/// misspelled `prompt_length` was ignored, and the gate ran with the default prompt.
const TAPE_FIELDS: [&str; 3] = ["tokens", "tape", "prompt_len"];
const ORACLE_FIELDS: [&str; 6] = [
    "gen_len",
    "vocab",
    "steps",
    "reference",
    "model_file",
    "model_sha256",
];

/// A JSON value's kind, for errors that name what a field holds instead of what it needs.
fn json_kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value as J;
    match v {
        J::Null => "null",
        J::Bool(_) => "a boolean",
        J::Number(_) => "a number",
        J::String(_) => "a string",
        J::Array(_) => "an array",
        J::Object(_) => "an object",
    }
}

/// A JSON value as errors quote it: as the file wrote it (`text`, the file, at `pointer`: a
/// number serde_json reads as an f64 keeps its literal, `jsonin::as_written`), short whatever
/// its size.
fn json_short(text: &str, pointer: &str, v: &serde_json::Value) -> String {
    let t = crate::jsonin::as_written(text, pointer, v);
    match t.char_indices().nth(40) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t,
    }
}

/// Read a tape file: a JSON object with a `tokens` or a `tape` array of token ids (each a
/// non-negative integer that fits a u32) and an optional `prompt_len` (1 up to the tape's
/// length). The file is at most TAPE_MAX_BYTES and UTF-8. Every breach is an error naming
/// the file and the field; nothing here panics on any input.
pub fn read_tape(path: &Path) -> Result<Tape> {
    use std::io::Read as _;
    let name = || format!("--tape {}", path.display());
    // A FIFO: refused before the open, which would block until a writer came (for ever,
    // an interrupted soak too), and a run reads its tape more than once, which a FIFO's
    // one stream cannot give (`--tape <(...)` read as empty the second time).
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo()) {
            bail!(
                "{}: is a FIFO; a tape is read more than once, give a file",
                name()
            );
        }
    }
    let f = std::fs::File::open(path).with_context(name)?;
    // Read one byte past the cap (not what the metadata says: a FIFO or a device has no
    // length), so a file over it is refused having read no more than that.
    let mut bytes = Vec::new();
    f.take(TAPE_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(name)?;
    if bytes.len() as u64 > TAPE_MAX_BYTES {
        let size = std::fs::metadata(path)
            .ok()
            .filter(|m| m.is_file())
            .map_or_else(
                || "more than".to_string(),
                |m| format!("{} bytes, over", m.len()),
            );
        bail!(
            "{}: {size} the limit of {TAPE_MAX_BYTES} bytes for a tape",
            name()
        );
    }
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        anyhow!(
            "{}: not UTF-8 text (invalid byte at offset {})",
            name(),
            e.valid_up_to()
        )
    })?;
    let v = crate::jsonin::parse_unique(text).map_err(|e| anyhow!("{}: {e}", name()))?;
    let obj = v.as_object().ok_or_else(|| {
        anyhow!(
            "{}: the top level is {}, need a JSON object with a `tokens` or `tape` array",
            name(),
            json_kind(&v)
        )
    })?;
    let known = |k: &str| TAPE_FIELDS.contains(&k) || ORACLE_FIELDS.contains(&k);
    if let Some(k) = obj.keys().find(|k| !known(k)) {
        bail!(
            "{}: unknown field `{}`; a tape holds `tokens` or `tape`, `prompt_len`, and an oracle tape's {}",
            name(),
            k.chars().take(40).collect::<String>(),
            ORACLE_FIELDS
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let key = match (obj.get("tokens"), obj.get("tape")) {
        (Some(_), Some(_)) => bail!(
            "{}: has both `tokens` and `tape`: give the token ids once",
            name()
        ),
        (Some(_), None) => "tokens",
        (None, Some(_)) => "tape",
        (None, None) => bail!("{}: no `tokens` or `tape` array", name()),
    };
    let arr = obj[key].as_array().ok_or_else(|| {
        anyhow!(
            "{}: `{key}` is {}, need an array of token ids",
            name(),
            json_kind(&obj[key])
        )
    })?;
    let mut tokens = Vec::with_capacity(arr.len());
    for (i, t) in arr.iter().enumerate() {
        let id = t
            .as_u64()
            .and_then(|id| u32::try_from(id).ok())
            .ok_or_else(|| {
                anyhow!(
                    "{}: `{key}` entry {i} ({}) is not a token id (a non-negative integer)",
                    name(),
                    json_short(text, &format!("/{key}/{i}"), t)
                )
            })?;
        tokens.push(id);
    }
    if tokens.is_empty() {
        bail!("{}: `{key}` is empty: the tape is empty", name());
    }
    // A count field (`prompt_len`, `gen_len`), when the file has it.
    let count = |field: &str| -> Result<Option<u64>> {
        obj.get(field)
            .map(|v| {
                v.as_u64().ok_or_else(|| {
                    anyhow!(
                        "{}: `{field}` ({}) is not a non-negative integer",
                        name(),
                        json_short(text, &format!("/{field}"), v)
                    )
                })
            })
            .transpose()
    };
    let prompt_len = match count("prompt_len")? {
        None => None,
        Some(n) => {
            if n == 0 || n > tokens.len() as u64 {
                bail!(
                    "{}: `prompt_len` {n}: must be in 1..={} (the tape's {} tokens)",
                    name(),
                    tokens.len(),
                    tokens.len()
                );
            }
            Some(n as usize)
        }
    };
    // An oracle tape's generated count: its prompt and generated tokens make the tape (one
    // cut short or extended by hand no longer matches its reference's steps).
    if let Some(g) = count("gen_len")? {
        let fits = match prompt_len {
            Some(p) => (p as u64).checked_add(g) == Some(tokens.len() as u64),
            None => g < tokens.len() as u64,
        };
        if !fits {
            bail!(
                "{}: `gen_len` {g} and `prompt_len` {} do not make the tape's {} tokens",
                name(),
                prompt_len.map_or_else(|| "(none)".to_string(), |p| p.to_string()),
                tokens.len()
            );
        }
    }
    Ok(Tape { tokens, prompt_len })
}

/// A tape's bounds against the model: every id below the vocab size, and no more positions
/// than the model's context length (`context_length` 0: no bound, which only a hand-made
/// config in a test has; a GGUF must name one).
pub fn check_tape(t: &Tape, path: &Path, vocab: usize, context_length: usize) -> Result<()> {
    for (i, &id) in t.tokens.iter().enumerate() {
        if id as usize >= vocab {
            bail!(
                "--tape {}: entry {i} ({id}) is not a token id below the vocab size {vocab}",
                path.display()
            );
        }
    }
    if context_length > 0 && t.tokens.len() > context_length {
        bail!(
            "--tape {}: {} tokens, more than the model's context length {context_length} (its GGUF `context_length`)",
            path.display(),
            t.tokens.len()
        );
    }
    Ok(())
}

/// Row 0's prompt length by the one rule for tapes: a tape's own `prompt_len`; else
/// `--prompt-len` (default DEFAULT_PROMPT_LEN; with a tape the default is at most the
/// tape's length, a given value longer than the tape is refused). A `--prompt-len` given
/// beside a tape's `prompt_len` must equal it. 0 is refused. `tape`: the tape read from
/// `--tape`, when there is one.
pub fn gate_prompt_len(args: &GateOptions, tape: Option<&Tape>) -> Result<usize> {
    let given = args.prompt_len;
    let path = || {
        args.tape
            .as_deref()
            .map_or_else(String::new, |p| p.display().to_string())
    };
    if given == Some(0) {
        bail!("--prompt-len 0: need at least one prompt token");
    }
    let Some(t) = tape else {
        return Ok(given.unwrap_or(DEFAULT_PROMPT_LEN));
    };
    match (t.prompt_len, given) {
        (Some(own), Some(g)) if g != own => bail!(
            "--prompt-len {g} contradicts --tape {}, whose `prompt_len` is {own}: leave --prompt-len out (the tape sets it) or give {own}",
            path()
        ),
        (Some(own), _) => Ok(own),
        (None, Some(g)) if g > t.tokens.len() => bail!(
            "--prompt-len {g}: longer than --tape {} ({} tokens, no `prompt_len`)",
            path(),
            t.tokens.len()
        ),
        (None, Some(g)) => Ok(g),
        (None, None) => Ok(DEFAULT_PROMPT_LEN.min(t.tokens.len())),
    }
}

/// `gate_prompt_len` reading `--tape` itself (where no tape has been read yet).
pub fn args_prompt_len(args: &GateOptions) -> Result<usize> {
    let tape = args.tape.as_deref().map(read_tape).transpose()?;
    gate_prompt_len(args, tape.as_ref())
}
