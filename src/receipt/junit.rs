//! JUnit XML for `battery --junit` and `soak --junit`: one `<testsuite>`, one `<testcase>`
//! per gate or soak run, so a CI system shows each gate as a test of its own.
//!
//! Outcomes map as CI tools read them: a gate FAIL is a `<failure>` (its message the first
//! divergence line), a gate the battery skipped for lack of devices is `<skipped>`, a
//! harness error (bad file, backend error) is an `<error>`: a FAIL says the runtime broke a
//! law, an error says the harness could not tell.

use std::fmt::Write as _;
use std::path::Path;

/// What became of one test case.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Pass,
    /// `message`: the first divergence line; `detail`: every verdict line.
    Failure {
        message: String,
        detail: String,
    },
    Skipped {
        message: String,
    },
    Error {
        message: String,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    pub name: String,
    pub classname: String,
    pub time_s: f64,
    pub outcome: Outcome,
    /// `<property name=.. value=..>` pairs (the receipt path, at least, where one was written).
    pub properties: Vec<(String, String)>,
}

impl Case {
    pub fn new(name: impl Into<String>, classname: impl Into<String>, outcome: Outcome) -> Case {
        Case {
            name: name.into(),
            classname: classname.into(),
            time_s: 0.0,
            outcome,
            properties: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Suite {
    pub name: String,
    pub cases: Vec<Case>,
}

impl Suite {
    pub fn new(name: impl Into<String>) -> Suite {
        Suite {
            name: name.into(),
            cases: Vec::new(),
        }
    }

    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.cases.iter().filter(|c| f(&c.outcome)).count()
    }

    pub fn has_error(&self) -> bool {
        self.count(|o| matches!(o, Outcome::Error { .. })) > 0
    }

    pub fn to_xml(&self) -> String {
        let failures = self.count(|o| matches!(o, Outcome::Failure { .. }));
        let errors = self.count(|o| matches!(o, Outcome::Error { .. }));
        let skipped = self.count(|o| matches!(o, Outcome::Skipped { .. }));
        let time: f64 = self.cases.iter().map(|c| c.time_s).sum();
        let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        // `write!` into a String cannot fail; the results are ignored for that reason.
        let _ = writeln!(
            s,
            "<testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{time:.3}\">",
            esc(&self.name),
            self.cases.len()
        );
        for c in &self.cases {
            let _ = write!(
                s,
                "  <testcase name=\"{}\" classname=\"{}\" time=\"{:.3}\">",
                esc(&c.name),
                esc(&c.classname),
                c.time_s
            );
            if !c.properties.is_empty() {
                s.push_str("\n    <properties>");
                for (k, v) in &c.properties {
                    let _ = write!(
                        s,
                        "\n      <property name=\"{}\" value=\"{}\"/>",
                        esc(k),
                        esc(v)
                    );
                }
                s.push_str("\n    </properties>");
            }
            match &c.outcome {
                Outcome::Pass => {}
                Outcome::Failure { message, detail } => {
                    let _ = write!(
                        s,
                        "\n    <failure message=\"{}\" type=\"FAIL\">{}</failure>",
                        esc(message),
                        esc(detail)
                    );
                }
                Outcome::Skipped { message } => {
                    let _ = write!(s, "\n    <skipped message=\"{}\"/>", esc(message));
                }
                Outcome::Error { message } => {
                    let _ = write!(
                        s,
                        "\n    <error message=\"{}\" type=\"harness\"/>",
                        esc(message)
                    );
                }
            }
            if c.properties.is_empty() && c.outcome == Outcome::Pass {
                s.push_str("</testcase>\n");
            } else {
                s.push_str("\n  </testcase>\n");
            }
        }
        s.push_str("</testsuite>\n");
        s
    }

    /// Writes the XML atomically (a CI step reading it never sees half a file), creating the
    /// parent directories; an error names the file.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        super::write_atomic(path, self.to_xml().as_bytes()).map_err(|e| {
            std::io::Error::new(e.kind(), format!("writing --junit {}: {e}", path.display()))
        })
    }
}

/// Whether `path` holds a JUnit report as `Suite::write` writes one (its first 256 bytes
/// open with the XML declaration and a `<testsuite`): the only existing file a command that
/// stopped before checking its outputs against its inputs may replace with its report.
pub fn is_report(path: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let head = String::from_utf8_lossy(&head[..n]);
    head.starts_with("<?xml ") && head.contains("<testsuite")
}

/// Escapes text for an XML attribute value or element content. `\t`, `\n` and `\r` become
/// character references, so an attribute keeps them (a parser normalizes literal ones to
/// spaces). XML 1.0 cannot carry other C0 controls, U+FFFE or U+FFFF at all, not even as
/// references, so those are written as the visible text `\u{XX}` rather than dropped: a
/// message naming a bad byte in a file must still show which byte it was.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\t' => o.push_str("&#9;"),
            '\n' => o.push_str("&#10;"),
            '\r' => o.push_str("&#13;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {
                let _ = write!(o, "\\u{{{:x}}}", c as u32);
            }
            c => o.push(c),
        }
    }
    o
}

/// `--junit PATH` checked before any work: a directory, or a path with no file name, would
/// only fail after the whole battery or soak had run.
pub fn check_path(path: &Path) -> anyhow::Result<()> {
    if path.is_dir() || path.file_name().is_none() {
        anyhow::bail!(
            "--junit {}: is a directory, need a file path",
            path.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every character XML treats specially, and controls it cannot carry, in every place
    /// text goes: a strict parser reads the file and gets back the original text (controls
    /// as their visible `\u{..}` form).
    #[test]
    fn escaping_round_trips_through_a_strict_parser() {
        let nasty = "a&b<c>d\"e'f\tg\nh\ri\u{1}j\u{1b}k\u{7f}l\u{FFFF}m]]>n";
        let want = "a&b<c>d\"e'f\tg\nh\ri\\u{1}j\\u{1b}k\u{7f}l\\u{ffff}m]]>n";
        let mut s = Suite::new(nasty);
        let mut c = Case::new(
            nasty,
            nasty,
            Outcome::Failure {
                message: nasty.into(),
                detail: nasty.into(),
            },
        );
        c.properties.push(("receipt".into(), nasty.into()));
        s.cases.push(c);
        s.cases.push(Case::new(
            "s",
            "k",
            Outcome::Skipped {
                message: nasty.into(),
            },
        ));
        s.cases.push(Case::new(
            "e",
            "k",
            Outcome::Error {
                message: nasty.into(),
            },
        ));
        s.cases.push(Case::new("p", "k", Outcome::Pass));
        let xml = s.to_xml();
        let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
        let suite = doc.root_element();
        assert_eq!(suite.tag_name().name(), "testsuite");
        assert_eq!(suite.attribute("name"), Some(want));
        assert_eq!(suite.attribute("tests"), Some("4"));
        assert_eq!(suite.attribute("failures"), Some("1"));
        assert_eq!(suite.attribute("errors"), Some("1"));
        assert_eq!(suite.attribute("skipped"), Some("1"));
        let cases: Vec<_> = suite.children().filter(|n| n.is_element()).collect();
        assert_eq!(cases.len(), 4);
        let c0 = cases[0];
        assert_eq!(c0.attribute("name"), Some(want));
        assert_eq!(c0.attribute("classname"), Some(want));
        fn child<'a, 'i>(n: roxmltree::Node<'a, 'i>, tag: &str) -> roxmltree::Node<'a, 'i> {
            n.descendants()
                .find(|d| d.has_tag_name(tag))
                .unwrap_or_else(|| panic!("no <{tag}>"))
        }
        let f = child(c0, "failure");
        assert_eq!(f.attribute("message"), Some(want));
        assert_eq!(f.text(), Some(want));
        let p = child(c0, "property");
        assert_eq!(p.attribute("name"), Some("receipt"));
        assert_eq!(p.attribute("value"), Some(want));
        assert_eq!(child(cases[1], "skipped").attribute("message"), Some(want));
        assert_eq!(child(cases[2], "error").attribute("message"), Some(want));
        assert_eq!(cases[3].children().filter(|n| n.is_element()).count(), 0);
    }
}
