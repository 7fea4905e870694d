//! Docs that run: every TOML, shell, SQL and JSON snippet a reader would paste from README.md,
//! docs/*.md and config/ is parsed, and run where it can be. TOML must load as Galewatch's
//! settings; shell must pass `bash -n`, and each `galewatch` command in it must name a real
//! command and real options; SQL runs against a migrated database (in a transaction rolled back),
//! or, where the page says why it cannot (`<!-- snippet: parse only, REASON -->` on the line
//! before the fence), must at least parse on the server; JSON must parse. config/galewatch.toml's
//! commented examples (`#   key = value`, continued by deeper-indented comment lines) must load
//! once uncommented.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;

/// A fenced block of a page.
#[derive(Debug, Clone, PartialEq)]
struct Snippet {
    /// `page:line` of the opening fence.
    at: String,
    lang: String,
    body: String,
    /// The reason given by `<!-- snippet: parse only, REASON -->` just above the fence.
    parse_only: Option<String>,
}

/// The fenced blocks of a Markdown page, with their info string's first word as `lang`.
fn snippets(page: &str, text: &str) -> Vec<Snippet> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        let fence: String = trimmed.chars().take_while(|c| *c == '`').collect();
        if fence.len() < 3 {
            i += 1;
            continue;
        }
        let lang = trimmed[fence.len()..]
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string();
        let parse_only = i
            .checked_sub(1)
            .and_then(|p| lines[p].trim().strip_prefix("<!-- snippet: parse only"))
            .map(|r| {
                r.trim_end_matches("-->")
                    .trim_matches([',', ' '])
                    .to_string()
            });
        let start = i;
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && !lines[i].trim_start().starts_with(fence.as_str()) {
            body.push(lines[i]);
            i += 1;
        }
        out.push(Snippet {
            at: format!("{page}:{}", start + 1),
            lang,
            body: body.join("\n") + "\n",
            parse_only,
        });
        i += 1;
    }
    out
}

/// The commented examples of a settings file: a run of `#   key = …` lines (three spaces or
/// more after the `#`), each continued by comment lines indented deeper, uncommented.
fn commented_examples(page: &str, text: &str) -> Vec<Snippet> {
    let is_setting = |s: &str| {
        let key: String = s
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '"' | '-'))
            .collect();
        !key.is_empty() && s[key.len()..].trim_start().starts_with('=')
    };
    let mut out: Vec<Snippet> = Vec::new();
    let mut open = false;
    for (n, line) in text.lines().enumerate() {
        let Some(rest) = line.strip_prefix("#   ") else {
            open = false;
            continue;
        };
        if is_setting(rest) {
            if !open {
                out.push(Snippet {
                    at: format!("{page}:{}", n + 1),
                    lang: "toml".into(),
                    body: String::new(),
                    parse_only: None,
                });
                open = true;
            }
            out.last_mut().unwrap().body += &format!("{rest}\n");
        } else if open && rest.starts_with("  ") {
            out.last_mut().unwrap().body += &format!("{rest}\n");
        } else {
            open = false;
        }
    }
    out
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every page's snippets: README.md and docs/*.md.
fn all_snippets() -> Vec<Snippet> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
        .iter()
        .flat_map(|p| {
            let name = p.strip_prefix(root()).unwrap().display().to_string();
            snippets(&name, &std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

/// Why a TOML text is not a loadable settings file (over the defaults), or None.
fn settings_problem(text: &str) -> Option<String> {
    use figment::providers::{Format, Serialized, Toml};
    if let Err(e) = text.parse::<toml::Table>() {
        return Some(format!("not TOML: {e}"));
    }
    // A fragment that declares no signals of its own is read in a file that declares the ones
    // the docs use.
    let mut figment = figment::Figment::from(Serialized::defaults(
        galewatch::daemon::config::Settings::default(),
    ));
    if !text.parse::<toml::Table>().unwrap().contains_key("signals") {
        figment = figment.merge(Toml::string(DOC_SIGNALS));
    }
    let figment = figment.merge(Toml::string(text));
    let settings = match galewatch::daemon::config::Settings::from_figment(&figment) {
        Ok(s) => s,
        Err(e) => return Some(format!("not Galewatch's settings: {e}")),
    };
    match settings.validate() {
        Ok(_) => None,
        // An example names the site's files (certificates, keys, users), which this machine lacks.
        Err(e) if e.setting.ends_with("_file") && e.problem.contains("/etc/") => None,
        Err(e) => Some(format!("refused: {}: {}", e.setting, e.problem)),
    }
}

#[test]
fn toml_snippets_load_as_settings() {
    let mut checked = 0;
    let mut problems = Vec::new();
    let config = root().join("config/galewatch.toml");
    let examples = commented_examples(
        "config/galewatch.toml",
        &std::fs::read_to_string(&config).unwrap(),
    );
    assert!(
        examples.len() >= 2,
        "config/galewatch.toml's commented examples: {examples:?}"
    );
    for s in all_snippets()
        .into_iter()
        .filter(|s| s.lang == "toml")
        .chain(examples)
    {
        checked += 1;
        if let Some(p) = settings_problem(&s.body) {
            problems.push(format!("{}: {p}\n{}", s.at, s.body));
        }
    }
    assert!(checked >= 8, "only {checked} TOML snippets found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn json_snippets_parse() {
    let mut problems = Vec::new();
    for s in all_snippets().into_iter().filter(|s| s.lang == "json") {
        if let Err(e) = serde_json::from_str::<serde_json::Value>(&s.body) {
            problems.push(format!("{}: {e}\n{}", s.at, s.body));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The shell text of a snippet: a `console` block's `$ ` lines, a shell block whole.
fn shell_text(s: &Snippet) -> Option<String> {
    match s.lang.as_str() {
        "sh" | "bash" | "shell" => Some(s.body.clone()),
        "console" => Some(
            s.body
                .lines()
                .filter_map(|l| l.strip_prefix("$ "))
                .map(|l| format!("{l}\n"))
                .collect(),
        ),
        _ => None,
    }
}

/// The `galewatch` invocations of a shell text, as words: after `galewatch` or
/// `cargo run --release --`, up to the end of the command (a pipe, `;`, `&&`, a redirect or a
/// comment).
fn galewatch_commands(shell: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for line in shell.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let mut i = 0;
        while i < words.len() {
            let start = if words[i] == "galewatch" || words[i].ends_with("/galewatch") {
                Some(i + 1)
            } else if words[i..].starts_with(&["cargo", "run", "--release", "--"]) {
                Some(i + 4)
            } else {
                None
            };
            let Some(start) = start else {
                i += 1;
                continue;
            };
            let args: Vec<String> = words[start..]
                .iter()
                .take_while(|w| {
                    !matches!(**w, "|" | ";" | "&&" | "||" | "&" | "#")
                        && !w.starts_with('>')
                        && !w.starts_with('<')
                })
                .map(|w| w.to_string())
                .collect();
            i = start + args.len();
            out.push(args);
        }
    }
    out
}

/// `galewatch ARGS --help`'s text, or None when clap refuses the words as commands.
fn help(words: &[String]) -> Option<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .args(words)
        .arg("--help")
        .env_clear()
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether `--flag` is one of the options a help text lists (followed by a space, `=`, `,` or
/// the line's end, so that `--to` is not found in `--topic`).
fn lists_option(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        help[at + flag.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
    })
}

/// Why a `galewatch` command of the docs would not run as written, or None: its commands are
/// the longest run of leading bare words `--help` accepts, and each `--option` must be in that
/// command's help.
fn command_problem(args: &[String]) -> Option<String> {
    let bare = args
        .iter()
        .take_while(|w| {
            !w.starts_with('-') && w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
        })
        .count();
    let (n, text) = (0..=bare)
        .rev()
        .find_map(|n| help(&args[..n]).map(|t| (n, t)))?;
    if n == 0 && bare > 0 {
        return Some(format!("no command {:?}", args[0]));
    }
    let unknown: Vec<&str> = args[n..]
        .iter()
        .filter(|w| w.starts_with("--"))
        .map(|w| w.split('=').next().unwrap_or(w))
        .filter(|flag| !lists_option(&text, flag))
        .collect();
    (!unknown.is_empty()).then(|| {
        format!(
            "`galewatch {}` has no option {}",
            args[..n].join(" "),
            unknown.join(", ")
        )
    })
}

#[test]
fn shell_snippets_parse_and_their_galewatch_commands_exist() {
    let mut problems = Vec::new();
    let mut commands = 0;
    let snippets: Vec<Snippet> = all_snippets();
    for s in &snippets {
        let Some(shell) = shell_text(s) else { continue };
        let out = Command::new("bash")
            .args(["-n", "-c", &shell])
            .output()
            .expect("bash");
        if !out.status.success() {
            problems.push(format!(
                "{}: bash -n: {}",
                s.at,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        for args in galewatch_commands(&shell) {
            commands += 1;
            if let Some(p) = command_problem(&args) {
                problems.push(format!("{}: {p}: galewatch {}", s.at, args.join(" ")));
            }
        }
    }
    assert!(commands >= 10, "only {commands} galewatch commands found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The statements of a SQL text: split at `;` outside quotes, dollar quotes and comments.
fn statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = sql.chars().peekable();
    let mut quote: Option<String> = None;
    while let Some(c) = chars.next() {
        match &quote {
            Some(q) if q == "'" || q == "\"" => {
                cur.push(c);
                if c.to_string() == *q {
                    quote = None;
                }
            }
            Some(q) if q == "--" => {
                if c == '\n' {
                    quote = None;
                    cur.push(c);
                }
            }
            Some(tag) => {
                cur.push(c);
                if cur.ends_with(tag.as_str()) && cur.len() > tag.len() {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => {
                    quote = Some(c.to_string());
                    cur.push(c);
                }
                '-' if chars.peek() == Some(&'-') => quote = Some("--".into()),
                '$' if chars
                    .peek()
                    .is_some_and(|n| *n == '$' || n.is_ascii_alphabetic()) =>
                {
                    let mut tag = String::from("$");
                    while let Some(&n) = chars.peek() {
                        tag.push(n);
                        chars.next();
                        if n == '$' || !(n.is_ascii_alphanumeric() || n == '_') {
                            break;
                        }
                    }
                    cur.push_str(&tag);
                    if tag.ends_with('$') {
                        quote = Some(tag);
                    }
                }
                ';' => {
                    out.push(std::mem::take(&mut cur));
                }
                _ => cur.push(c),
            },
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Grafana's macros as Grafana expands them for PostgreSQL (a 10-minute interval, the last day,
/// one turbine).
fn expand_grafana(sql: &str) -> String {
    let mut s = sql.to_string();
    while let Some(at) = s.find("$__timeGroupAlias(") {
        let open = at + "$__timeGroupAlias(".len();
        let close = open + s[open..].find(')').unwrap();
        let column = s[open..close].split(',').next().unwrap().trim().to_string();
        s.replace_range(
            at..=close,
            &format!("floor(extract(epoch from {column})/600)*600 AS \"time\""),
        );
    }
    while let Some(at) = s.find("$__timeFilter(") {
        let open = at + "$__timeFilter(".len();
        let close = open + s[open..].find(')').unwrap();
        let column = s[open..close].trim().to_string();
        s.replace_range(
            at..=close,
            &format!("{column} BETWEEN now() - interval '1 day' AND now()"),
        );
    }
    s.replace("$turbine", "WTG-00001")
}

/// The signals the docs' examples name.
const DOC_SIGNALS: &str = r#"
[[signals]]
name = "power_kw"
required = true
[[signals]]
name = "wind_speed_ms"
[[signals]]
name = "rotor_rpm"
[[signals]]
name = "nacelle_dir_deg"
angle = true
[[signals]]
name = "status_code"
type = "integer"
[[signals]]
name = "ambient_temp_c"
[[signals]]
name = "wind_dir_deg"
angle = true
"#;

/// The database the docs' queries run on: their signals, with availability kept.
fn database_settings() -> String {
    format!(
        "availability_status_signal = \"status_code\"\n\
         availability_categories = {{ full_performance = [1], forced_outage = [6] }}\n\
         sample_period = \"2s\"\n{DOC_SIGNALS}"
    )
}

#[tokio::test]
async fn sql_snippets_run_on_a_migrated_database() {
    let db = TestDb::create().await;
    let settings = SettingsFile::new(&database_settings());
    let out = Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .args(["migrate", "--config"])
        .arg(&settings.path)
        .env_clear()
        .env("GALEWATCH_DATABASE_URL", &db.url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut client = db.client().await;
    let mut problems = Vec::new();
    let mut ran = 0;
    let mut parsed_only = 0;
    for s in all_snippets().into_iter().filter(|s| s.lang == "sql") {
        let tx = client.transaction().await.unwrap();
        for (k, stmt) in statements(&expand_grafana(&s.body)).iter().enumerate() {
            let upper = stmt.to_ascii_uppercase();
            if matches!(upper.as_str(), "BEGIN" | "COMMIT" | "ROLLBACK") {
                continue;
            }
            tx.batch_execute(&format!("SAVEPOINT s{k}")).await.unwrap();
            let result = if stmt.contains("$1") {
                tx.prepare(stmt).await.map(|_| ())
            } else {
                tx.batch_execute(stmt).await
            };
            let code = result.as_ref().err().and_then(|e| e.code().cloned());
            match (&result, &s.parse_only) {
                (Ok(()), _) => ran += 1,
                (Err(_), Some(_))
                    if code != Some(tokio_postgres::error::SqlState::SYNTAX_ERROR) =>
                {
                    parsed_only += 1;
                }
                (Err(e), _) => problems.push(format!(
                    "{} (statement {}): {}\n{stmt}",
                    s.at,
                    k + 1,
                    e.as_db_error()
                        .map_or(e.to_string(), |d| d.message().to_string())
                )),
            }
            tx.batch_execute(&format!("ROLLBACK TO SAVEPOINT s{k}"))
                .await
                .unwrap();
        }
        tx.rollback().await.unwrap();
    }
    println!("{ran} SQL statements ran, {parsed_only} only parsed");
    assert!(ran >= 8, "only {ran} statements ran");
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

// The extractors themselves, on the cases that matter.

#[test]
fn a_broken_multi_line_inline_table_is_caught() {
    // The example that shipped broken (TOML 1.0: an inline table is one line).
    let text = "#   availability_status_signal = \"status_code\"\n\
                #   availability_categories = { full_performance = [1],\n\
                #       forced_outage = [6] }\n\
                #   name      the column in readings\n";
    let ex = commented_examples("x", text);
    assert_eq!(ex.len(), 1, "{ex:?}");
    assert!(ex[0].body.contains("forced_outage"));
    assert!(!ex[0].body.contains("the column"));
    let p = settings_problem(&ex[0].body).expect("refused");
    assert!(p.starts_with("not TOML"), "{p}");
    // The same keys as dotted keys load.
    assert_eq!(
        settings_problem(
            "availability_status_signal = \"status_code\"\n\
             availability_categories.full_performance = [1]\n\
             [[signals]]\nname = \"status_code\"\ntype = \"integer\"\n"
        ),
        None
    );
}

#[test]
fn fences_notes_and_commands_are_read_as_written() {
    let page = "text\n<!-- snippet: parse only, needs timescaledb -->\n```sql\nSELECT 1;\n```\n\
                ```sh\ngalewatch export --turbine T1 --output x.csv | head # c\n```\n";
    let s = snippets("p", page);
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].parse_only.as_deref(), Some("needs timescaledb"));
    assert_eq!(s[0].at, "p:3");
    assert_eq!(s[1].parse_only, None);
    assert_eq!(
        galewatch_commands(&s[1].body),
        vec![vec!["export", "--turbine", "T1", "--output", "x.csv"]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>()]
    );
    assert_eq!(
        statements("SELECT ';' AS a; -- x; y\nDO $$ BEGIN PERFORM 1; END $$;"),
        vec!["SELECT ';' AS a", "DO $$ BEGIN PERFORM 1; END $$"]
    );
    assert!(command_problem(&["export".into(), "--no-such-flag".into()]).is_some());
    assert!(command_problem(&["no-such-command".into()]).is_some());
    assert_eq!(command_problem(&["export".into(), "--output".into()]), None);
    assert!(lists_option("  --topic <T>\n", "--topic"));
    assert!(!lists_option("  --topic <T>\n", "--to"));
}
