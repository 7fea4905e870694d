//! The house's rules on size: a file outside tests holds at most 800 lines of code (comments,
//! blank lines and its test module left out), a function at most 100. Files and functions that
//! broke the rule before it was checked are listed below with the size they had then: each may
//! only shrink, and leaves the list once within the rule (the test says so), so the list can
//! only get shorter. A new file or function past the rule fails.

use std::path::{Path, PathBuf};

/// Most lines of code in a file.
const ROOM_LINES: usize = 800;
/// Most lines in a function (its signature to its closing brace).
const FN_LINES: usize = 100;

/// Rooms allowed past the rule, with their size (none: the last were split on 2026-12-06, issue
/// "A statistic is one room"). One listed may not grow, and leaves the list once within it.
const OVERSIZE_ROOMS: &[(&str, usize)] = &[];

/// Functions allowed past the rule, as `file::name`, with their length (none).
const LONG_FNS: &[(&str, usize)] = &[];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("src is readable") {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("tests.rs") {
            // A module's tests in a file of their own (`tests.rs`) are tests.
            out.push(p);
        }
    }
}

/// The lines of a file before its test module (`#[cfg(test)]` at the start of a line).
fn before_tests(text: &str) -> Vec<&str> {
    text.lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .collect()
}

/// Lines of code: not blank, not only a comment.
fn code_lines(lines: &[&str]) -> usize {
    lines
        .iter()
        .filter(|l| {
            let t = l.trim();
            !t.is_empty() && !t.starts_with("//")
        })
        .count()
}

/// Each function of `lines` (rustfmt's layout: a `fn` line, the body closed by a `}` at the
/// line's own indentation): its name and its length in lines, signature to closing brace.
fn functions(lines: &[&str]) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let indent = l.len() - t.len();
        let Some(rest) = [
            "fn ",
            "pub fn ",
            "pub(crate) fn ",
            "pub(super) fn ",
            "async fn ",
        ]
        .iter()
        .chain(&[
            "pub async fn ",
            "pub(crate) async fn ",
            "pub(super) async fn ",
        ])
        .find_map(|p| t.strip_prefix(p)) else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let close = format!("{}}}", " ".repeat(indent));
        // A signature ending in `;` (a trait's) has no body.
        let Some(sig_end) = lines[i..]
            .iter()
            .position(|l| l.ends_with('{') || l.ends_with(';'))
        else {
            continue;
        };
        if lines[i + sig_end].ends_with(';') {
            continue;
        }
        if let Some(end) = lines[i + sig_end..].iter().position(|l| *l == close) {
            out.push((name, sig_end + end + 1));
        }
    }
    out
}

fn files() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    sources(&root.join("src"), &mut paths);
    assert!(paths.len() > 50, "found the sources ({})", paths.len());
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            (rel, std::fs::read_to_string(&p).expect("readable"))
        })
        .collect()
}

#[test]
fn rooms_hold_at_most_800_lines_of_code() {
    let mut problems = Vec::new();
    let all = files();
    for (listed, _) in OVERSIZE_ROOMS {
        if !all.iter().any(|(rel, _)| rel == listed) {
            problems.push(format!("{listed}: gone: take it off OVERSIZE_ROOMS"));
        }
    }
    for (rel, text) in all {
        let n = code_lines(&before_tests(&text));
        match OVERSIZE_ROOMS.iter().find(|(f, _)| *f == rel) {
            Some((_, cap)) if n > *cap => problems.push(format!(
                "{rel}: {n} lines of code, grown past {cap}: split it"
            )),
            Some(_) if n <= ROOM_LINES => problems.push(format!(
                "{rel}: {n} lines, within the rule now: take it off OVERSIZE_ROOMS"
            )),
            Some(_) => {}
            None if n > ROOM_LINES => problems.push(format!(
                "{rel}: {n} lines of code, past {ROOM_LINES}: split it into rooms of one job"
            )),
            None => {}
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn functions_hold_at_most_100_lines() {
    let mut problems = Vec::new();
    let mut seen = Vec::new();
    for (rel, text) in files() {
        for (name, n) in functions(&before_tests(&text)) {
            let key = format!("{rel}::{name}");
            seen.push(key.clone());
            match LONG_FNS.iter().find(|(f, _)| *f == key) {
                Some((_, cap)) if n > *cap => {
                    problems.push(format!("{key}: {n} lines, grown past {cap}"))
                }
                Some(_) if n <= FN_LINES => problems.push(format!(
                    "{key}: {n} lines, within the rule now: take it off LONG_FNS"
                )),
                Some(_) => {}
                None if n > FN_LINES => {
                    problems.push(format!("{key}: {n} lines, past {FN_LINES}: split it"))
                }
                None => {}
            }
        }
    }
    for (listed, _) in LONG_FNS {
        if !seen.iter().any(|k| k == listed) {
            problems.push(format!("{listed}: gone: take it off LONG_FNS"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_counts_read_what_they_should() {
    let text = "//! doc\nuse x;\n\n// note\nfn a() {\n    let x = 1;\n}\n\n    pub fn b(\n        y: u8,\n    ) -> u8 {\n        y\n    }\ntrait T {\n    fn c(&self);\n}\n#[cfg(test)]\nmod tests {\n    fn big() {}\n}\n";
    let lines = before_tests(text);
    assert_eq!(code_lines(&lines), 12);
    assert_eq!(
        functions(&lines),
        vec![("a".to_string(), 3), ("b".to_string(), 5)]
    );
}
