//! The documentation holds together: every relative link in README.md and docs/*.md names a file
//! that exists, every `#anchor` a heading of the page it points at (GitHub's slugs), every page
//! opens with who it is for, and the README stays a front door of at most 250 lines. Pure file
//! reading, no services.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// The README's budget: what Galewatch is, the two commands, install, where to read next.
const README_MAX_LINES: usize = 250;

/// A link as written: `[text](target)` or `![alt](target)`, with the line it is on.
#[derive(Debug, PartialEq)]
struct Link {
    line: usize,
    target: String,
}

/// The text of a page with fenced code blocks blanked (their lines kept, so line numbers hold)
/// and inline code spans removed: a `[x](y)` or a `# comment` inside code is no link or heading.
/// `Err(line)` when a fence opened on that line is never closed: the rest of the page would be
/// taken for code and go unchecked.
fn prose_lines(text: &str) -> Result<Vec<String>, usize> {
    let mut fence: Option<(String, usize)> = None;
    let mut blanked = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|c| *c == '`' || *c == '~')
            .collect();
        if let Some((open, _)) = &fence {
            if marker.len() >= open.len()
                && marker.starts_with(&open[..1])
                && trimmed.trim() == marker
            {
                fence = None;
            }
            blanked.push("");
            continue;
        }
        if marker.len() >= 3
            && (marker.chars().all(|c| c == '`') || marker.chars().all(|c| c == '~'))
        {
            fence = Some((marker, n + 1));
            blanked.push("");
            continue;
        }
        blanked.push(line);
    }
    if let Some((_, line)) = fence {
        return Err(line);
    }
    Ok(strip_code_spans(&blanked.join("\n"))
        .split('\n')
        .map(str::to_string)
        .collect())
}

/// `a `b` c` → `a  c`: a code span opens with a run of backticks and closes with a run as long,
/// on the same line or a later one of the same paragraph; the line breaks inside it are kept.
fn strip_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|c| **c == '`').count();
        let mut j = i + run;
        let mut closed = None;
        while j < chars.len() {
            if chars[j] == '\n' && chars.get(j + 1) == Some(&'\n') {
                break; // a paragraph ends: no span crosses it
            }
            if chars[j] == '`' {
                let r = chars[j..].iter().take_while(|c| **c == '`').count();
                if r == run {
                    closed = Some(j + r);
                    break;
                }
                j += r;
            } else {
                j += 1;
            }
        }
        match closed {
            Some(end) => {
                out.extend(chars[i..end].iter().filter(|c| **c == '\n'));
                i = end;
            }
            None => {
                // An unclosed run is literal backticks.
                out.extend(&chars[i..i + run]);
                i += run;
            }
        }
    }
    out
}

/// Every `](target)` in the page's prose, with its 1-based line.
fn links(text: &str) -> Vec<Link> {
    let mut found = Vec::new();
    for (n, line) in prose_lines(text).unwrap_or_default().iter().enumerate() {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].trim();
            // `[text](path "title")`: the title is no part of the path.
            let target = target.split_once(' ').map_or(target, |(t, _)| t);
            found.push(Link {
                line: n + 1,
                target: target.to_string(),
            });
            rest = &after[end..];
        }
    }
    found
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, letters, digits, `-` and `_` kept,
/// every other character (punctuation, backticks, em dashes) dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| {
            if c == ' ' {
                Some('-')
            } else if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c)
            } else {
                None
            }
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// The anchors of a page's ATX headings (`## Text`), a repeated one numbered `-1`, `-2` as
/// GitHub numbers them. Headings inside code blocks (a shell comment) are none.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let raw: Vec<&str> = text.lines().collect();
    for (n, line) in prose_lines(text).unwrap_or_default().iter().enumerate() {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        // The heading's own text, code spans included: `## The `x` key` slugs to the-x-key.
        let own = raw[n][hashes..].trim().trim_end_matches('#').trim();
        let base = slug(own);
        let count = seen.entry(base.clone()).or_insert(0);
        out.insert(if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    out
}

/// `docs/../config/x` → `config/x`; `None` when the path climbs out of the repository.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            _ => return None,
        }
    }
    Some(out)
}

/// What is wrong with the links of `pages` (repository-relative path → text): a target that is
/// not in the repository (`exists` answers for paths that are not pages), an anchor that no
/// heading of the target page makes. Links with a scheme (`https:`, `mailto:`) are not checked.
fn problems(pages: &BTreeMap<PathBuf, String>, exists: impl Fn(&Path) -> bool) -> Vec<String> {
    let anchors_of: BTreeMap<&PathBuf, BTreeSet<String>> =
        pages.iter().map(|(p, t)| (p, anchors(t))).collect();
    let mut out = Vec::new();
    for (page, text) in pages {
        if let Err(line) = prose_lines(text) {
            out.push(format!(
                "{}:{line}: a code fence that never closes hides the rest of the page",
                page.display()
            ));
            continue;
        }
        for link in links(text) {
            let at = format!("{}:{}: ({})", page.display(), link.line, link.target);
            if link.target.contains("://") || link.target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match link.target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (link.target.as_str(), None),
            };
            let target = if path.is_empty() {
                page.clone()
            } else if path.starts_with('/') {
                out.push(format!(
                    "{at}: an absolute path does not resolve on GitHub nor in a checkout"
                ));
                continue;
            } else {
                match normalize(&page.parent().unwrap_or(Path::new("")).join(path)) {
                    Some(t) => t,
                    None => {
                        out.push(format!("{at}: climbs out of the repository"));
                        continue;
                    }
                }
            };
            if !pages.contains_key(&target) && !exists(&target) {
                out.push(format!("{at}: no such file"));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            match anchors_of.get(&target) {
                Some(known) if known.contains(anchor) => {}
                Some(_) => out.push(format!(
                    "{at}: {} has no heading #{anchor}",
                    target.display()
                )),
                // An anchor into a file that is no page (a source line, `#L10`) is not checked.
                None => {}
            }
        }
    }
    out
}

/// README.md and every docs/*.md, by repository-relative path.
fn repository_pages(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut pages = BTreeMap::new();
    let read = |p: &Path| {
        std::fs::read_to_string(root.join(p)).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    pages.insert(PathBuf::from("README.md"), read(Path::new("README.md")));
    for e in std::fs::read_dir(root.join("docs")).expect("docs/ is readable") {
        let name = e.expect("a directory entry").file_name();
        let rel = Path::new("docs").join(&name);
        if rel.extension().is_some_and(|x| x == "md") {
            let text = read(&rel);
            pages.insert(rel, text);
        }
    }
    pages
}

#[test]
fn every_relative_link_resolves_to_a_file_and_a_heading() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pages = repository_pages(root);
    assert!(
        pages.len() > 5,
        "README.md and the docs/ pages: {:?}",
        pages.keys()
    );
    let readme_links = links(&pages[Path::new("README.md")]).len();
    assert!(
        readme_links >= 10,
        "the README's links to its readers' pages: {readme_links} found"
    );
    let found = problems(&pages, |p| root.join(p).exists());
    assert!(found.is_empty(), "broken links:\n{}", found.join("\n"));
}

#[test]
fn readme_is_a_front_door() {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md is readable");
    let lines = text.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, at most {README_MAX_LINES}: move the detail into docs/, by reader"
    );
}

/// A reader lands on a page from the README: its title, then one paragraph in italics saying who
/// it is for (`*For the operator …*`).
#[test]
fn every_page_says_who_it_is_for() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let unsaid: Vec<String> = repository_pages(root)
        .into_iter()
        .filter(|(p, _)| p.starts_with("docs"))
        .filter(|(_, text)| !says_who_it_is_for(text))
        .map(|(p, _)| p.display().to_string())
        .collect();
    assert!(
        unsaid.is_empty(),
        "pages that do not open with who they are for: {unsaid:?}"
    );
}

/// `# Title`, a blank line, then `*For …` as the first words.
fn says_who_it_is_for(text: &str) -> bool {
    let mut lines = text.lines();
    lines.next().is_some_and(|l| l.starts_with("# "))
        && lines.next() == Some("")
        && lines.next().is_some_and(|l| l.starts_with("*For "))
}

#[cfg(test)]
mod rules {
    use super::*;

    fn pages(list: &[(&str, &str)]) -> BTreeMap<PathBuf, String> {
        list.iter()
            .map(|(p, t)| (PathBuf::from(p), t.to_string()))
            .collect()
    }

    #[test]
    fn who_a_page_is_for_opens_it() {
        assert!(says_who_it_is_for("# Page\n\n*For the operator: this.*\n"));
        assert!(!says_who_it_is_for("# Page\n\nGalewatch is …\n"));
        assert!(!says_who_it_is_for("*For the operator*\n# Page\n"));
        assert!(!says_who_it_is_for(""));
    }

    #[test]
    fn slugs_follow_github() {
        assert_eq!(
            slug("Outcomes: where every reading goes"),
            "outcomes-where-every-reading-goes"
        );
        assert_eq!(
            slug("The broker: what goes wrong with a default Mosquitto"),
            "the-broker-what-goes-wrong-with-a-default-mosquitto"
        );
        assert_eq!(
            slug("What `galewatch migrate` does there"),
            "what-galewatch-migrate-does-there"
        );
        assert_eq!(
            slug("Past one machine — sizing, 2026"),
            "past-one-machine--sizing-2026"
        );
        assert_eq!(
            slug("snake_case and kebab-case"),
            "snake_case-and-kebab-case"
        );
        assert_eq!(slug("Ünïcode Überblick"), "ünïcode-überblick");
    }

    #[test]
    fn repeated_headings_are_numbered_and_code_is_no_heading() {
        let a = anchors("# Top\n## Notes\n```sh\n# a comment\n```\n## Notes\n#notaheading\n");
        let want: BTreeSet<String> = ["top", "notes", "notes-1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(a, want);
    }

    #[test]
    fn links_in_code_are_not_links() {
        let found =
            links("see [a](a.md) and `[b](b.md)`\n```\n[c](c.md)\n```\n![img](p.png \"title\")\n");
        let targets: Vec<&str> = found.iter().map(|l| l.target.as_str()).collect();
        assert_eq!(targets, ["a.md", "p.png"]);
        assert_eq!(found[1].line, 5);
    }

    #[test]
    fn a_code_span_may_cross_a_line_break_but_not_a_paragraph() {
        let found =
            links("`apt-get install a\nb` then [x](x.md)\n\nan unclosed ` tick, [y](y.md)\n");
        let at: Vec<(usize, &str)> = found.iter().map(|l| (l.line, l.target.as_str())).collect();
        assert_eq!(at, [(2, "x.md"), (4, "y.md")]);
    }

    #[test]
    fn an_unclosed_fence_is_reported_not_skipped() {
        let p = pages(&[(
            "README.md",
            "# G\n```sh\nrun\n```\ntext\n```\n[gone](gone.md)\n",
        )]);
        let found = problems(&p, |_| false);
        assert_eq!(
            found,
            ["README.md:6: a code fence that never closes hides the rest of the page"]
        );
    }

    #[test]
    fn a_missing_file_is_reported_with_its_place() {
        let p = pages(&[("README.md", "# G\n\nRead [the guide](docs/guide.md).\n")]);
        let found = problems(&p, |_| false);
        assert_eq!(found, ["README.md:3: (docs/guide.md): no such file"]);
    }

    #[test]
    fn a_missing_anchor_is_reported_and_a_present_one_is_not() {
        let p = pages(&[
            (
                "README.md",
                "# G\n[ok](docs/a.md#the-part) [bad](docs/a.md#gone) [self](#g)\n",
            ),
            ("docs/a.md", "# A\n## The part\n"),
        ]);
        let found = problems(&p, |_| false);
        assert_eq!(
            found,
            ["README.md:2: (docs/a.md#gone): docs/a.md has no heading #gone"]
        );
    }

    #[test]
    fn relative_paths_resolve_from_the_page_and_may_not_climb_out() {
        let p = pages(&[("docs/a.md", "[cfg](../config/x.toml) [up](../../etc/passwd) [abs](/etc/passwd) [web](https://example.org/#x)\n")]);
        let found = problems(&p, |t| t == Path::new("config/x.toml"));
        assert_eq!(
            found,
            [
                "docs/a.md:1: (../../etc/passwd): climbs out of the repository",
                "docs/a.md:1: (/etc/passwd): an absolute path does not resolve on GitHub nor in a checkout",
            ]
        );
    }

    #[test]
    fn an_anchor_into_a_file_that_is_no_page_is_not_checked() {
        let p = pages(&[("README.md", "[line](src/main.rs#L10)\n")]);
        assert!(problems(&p, |t| t == Path::new("src/main.rs")).is_empty());
    }
}
