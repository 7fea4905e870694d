//! The layers hold: every module imports only from layers below its own (docs/architecture.md),
//! `intake` and `sink` never import each other, the core names no I/O crate, and the crate root
//! re-exports nothing. Read from the source, so a new import that breaks the rule fails here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A top-level module's layer: it may import only from lower ones (and, for the ground, from
/// the ground too).
fn layer(top: &str) -> Option<u8> {
    Some(match top {
        "core" => 0,
        "backoff" | "console" | "error" | "probe" | "secret" | "telemetry" | "tls" => 1,
        "intake" | "sink" => 2,
        "daemon" => 3,
        "panel" => 4,
        "tools" => 5,
        _ => return None,
    })
}

const GROUND: u8 = 1;

/// Crates the pure core must not name: drivers, the runtime, the metrics recorder.
const IO_CRATES: [&str; 6] = [
    "tokio",
    "tokio_postgres",
    "rumqttc",
    "hyper",
    "metrics",
    "tokio_util",
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("src is readable") {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level modules a file names with `crate::…`.
fn imports(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

fn files() -> Vec<(String, PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    sources(&src, &mut paths);
    assert!(paths.len() > 50, "found the sources ({})", paths.len());
    paths
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(&src).expect("under src");
            let top = rel
                .components()
                .next()
                .expect("a path")
                .as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string();
            let text = std::fs::read_to_string(&p).expect("readable");
            (top, p, text)
        })
        .collect()
}

#[test]
fn every_module_imports_only_from_layers_below_it() {
    let mut broken = Vec::new();
    for (top, path, text) in files() {
        // The binary (main.rs and its cli/, one command a file) sits above every layer and uses
        // the library by its public paths (`galewatch::…`), never `crate::`.
        if top == "lib" || top == "main" || top == "cli" {
            continue;
        }
        let own = layer(&top).unwrap_or_else(|| {
            panic!(
                "{}: top-level module `{top}` has no layer in tests/architecture.rs \
                 (and docs/architecture.md)",
                path.display()
            )
        });
        for to in imports(&text) {
            if to == top {
                continue;
            }
            let Some(theirs) = layer(&to) else {
                broken.push(format!("{}: crate::{to} is no module", path.display()));
                continue;
            };
            let allowed = theirs < own || (own == GROUND && theirs == GROUND);
            if !allowed {
                broken.push(format!(
                    "{}: `{top}` (layer {own}) imports `{to}` (layer {theirs})",
                    path.display()
                ));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "imports against the layers:\n{}",
        broken.join("\n")
    );
}

#[test]
fn no_two_top_level_modules_import_each_other() {
    let mut imports_of: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for (top, _, text) in files() {
        imports_of.entry(top).or_default().extend(imports(&text));
    }
    let mut both = Vec::new();
    for (a, theirs) in &imports_of {
        for b in theirs.iter().filter(|b| *b > a) {
            if imports_of.get(b).is_some_and(|t| t.contains(a)) {
                both.push(format!("{a} and {b}"));
            }
        }
    }
    assert!(both.is_empty(), "modules that import each other: {both:?}");
}

/// The modules of `src/intake/` each file names (`crate::intake::X`), by the module it is in
/// (its first path component under `intake/`; `mod.rs` left out: it only declares them).
fn intake_imports() -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let intake = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/intake");
    let mut out: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for (_, path, text) in files() {
        let Ok(rel) = path.strip_prefix(&intake) else {
            continue;
        };
        let own = rel.components().next().expect("a path");
        let own = own
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if own == "mod" {
            continue;
        }
        let named = out.entry(own.clone()).or_default();
        for (i, _) in text.match_indices("crate::intake::") {
            let rest = &text[i + "crate::intake::".len()..];
            let m: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !m.is_empty() && m != own {
                named.insert(m);
            }
        }
    }
    out
}

#[test]
fn the_intake_s_modules_import_one_another_in_no_circle() {
    let graph = intake_imports();
    assert!(graph.len() >= 10, "{graph:?}");
    // Depth-first from each module: a path that comes back to where it started is a circle.
    fn walk<'a>(
        graph: &'a std::collections::BTreeMap<String, BTreeSet<String>>,
        at: &'a str,
        path: &mut Vec<&'a str>,
        circles: &mut Vec<String>,
    ) {
        if let Some(i) = path.iter().position(|p| *p == at) {
            if i == 0 {
                circles.push(format!("{} -> {at}", path.join(" -> ")));
            }
            return;
        }
        path.push(at);
        for next in graph.get(at).into_iter().flatten() {
            walk(graph, next, path, circles);
        }
        path.pop();
    }
    let mut circles = Vec::new();
    for start in graph.keys() {
        walk(&graph, start, &mut Vec::new(), &mut circles);
    }
    assert!(
        circles.is_empty(),
        "intake modules in a circle (share what both need from a third, as connect.rs and \
         broker.rs hold what subscribe, standby and leave share): {circles:?}"
    );
    assert!(
        graph["format"].is_empty(),
        "the format seam names {:?}: the daemon builds the list of formats",
        graph["format"]
    );
}

#[test]
fn intake_and_sink_never_name_each_other() {
    for (top, path, text) in files() {
        let other = match top.as_str() {
            "intake" => "crate::sink",
            "sink" => "crate::intake",
            _ => continue,
        };
        assert!(
            !text.contains(other),
            "{} names {other}: pass what it needs in through the daemon (daemon/seams.rs)",
            path.display()
        );
    }
}

#[test]
fn no_input_format_names_another() {
    // Each folder under src/intake/ that implements a format; the rules they share are in
    // intake/format/judge.rs. Only the daemon's registry (`daemon::stages::formats`) names them all.
    let intake = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/intake");
    let formats = ["json", "sparkplug"];
    for f in formats {
        assert!(
            intake.join(f).is_dir(),
            "src/intake/{f}/ is a format folder"
        );
    }
    let mut checked = 0;
    for (_, path, text) in files() {
        let Ok(rel) = path.strip_prefix(&intake) else {
            continue;
        };
        let Some(own) = formats.iter().find(|f| rel.starts_with(f)) else {
            continue;
        };
        checked += 1;
        for other in formats.iter().filter(|f| *f != own) {
            assert!(
                !text.contains(&format!("intake::{other}")),
                "{} names intake::{other}: what formats share goes in intake/format/",
                path.display()
            );
        }
    }
    assert!(checked >= 8, "{checked} format files checked");
}

#[test]
fn the_core_names_no_io_crate() {
    for (top, path, text) in files() {
        if top != "core" {
            continue;
        }
        for c in IO_CRATES {
            for form in [format!("use {c}::"), format!("{c}::"), format!("{c}!")] {
                let hit = text.lines().any(|l| {
                    let l = l.trim_start();
                    !l.starts_with("//") && l.contains(&form) && !l.contains(&format!("_{form}"))
                });
                assert!(!hit, "{} names `{c}`: the core does no I/O", path.display());
            }
        }
    }
}

#[test]
fn the_crate_root_re_exports_nothing() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("lib.rs");
    let uses: Vec<&str> = lib
        .lines()
        .filter(|l| l.trim_start().starts_with("pub use"))
        .collect();
    assert!(uses.is_empty(), "the crate root re-exports: {uses:?}");
}

#[test]
fn the_checks_see_a_broken_import() {
    // The reader finds every top-level name, so a violation cannot hide behind formatting.
    let found = imports("use crate::sink::db;\nlet x = crate::intake::ledger::Ledger::new();");
    assert_eq!(
        found,
        BTreeSet::from(["sink".to_string(), "intake".to_string()])
    );
    assert!(layer("intake").unwrap() == layer("sink").unwrap());
}
