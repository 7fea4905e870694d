//! The command line as an operator meets it: help, bad settings, migrations run twice.

mod common;

use std::process::{Command, Output};

use common::*;

fn galewatch(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().copied())
        .output()
        .expect("run galewatch")
}

#[test]
fn every_subcommand_has_help() {
    for sub in [
        &["--help"][..],
        &["run", "--help"],
        &["migrate", "--help"],
        &["simulate", "--help"],
    ] {
        let out = galewatch(sub, &[]);
        assert!(out.status.success(), "{sub:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Usage: galewatch"), "{sub:?}: {text}");
    }
}

/// The long `--help` of every command that reads settings lists each one with its variable and
/// default, then the environment, the files and the exit statuses; `-h` stays a summary.
#[test]
fn the_long_help_lists_the_settings_and_the_short_one_does_not() {
    for sub in [
        &["run"][..],
        &["migrate"],
        &["leave"],
        &["panel"],
        &["turbines"],
        &["quarantine", "list"],
        &["quarantine", "resolve"],
        &["rejected", "list"],
        &["export"],
        &["stats", "rebuild"],
        &["settings"],
    ] {
        let long = galewatch(&[sub, &["--help"]].concat(), &[]);
        assert!(long.status.success(), "{sub:?}");
        let text = String::from_utf8_lossy(&long.stdout);
        for want in [
            "    batch_max_readings = 5000\n        [GALEWATCH_BATCH_MAX_READINGS] A batch is written",
            "    database_password = \"\"\n        [GALEWATCH_DATABASE_PASSWORD or GALEWATCH_DATABASE_PASSWORD_FILE (a secret)]",
            "    payload_turbine_topic_level (unset)\n",
            "\nEnvironment:\n  GALEWATCH_CONFIG\n",
            "CREDENTIALS_DIRECTORY",
            "\nFiles:\n  /etc/galewatch/galewatch.toml\n",
            "/etc/galewatch/credentials/",
            "\nExit status:\n  0\n",
            "credentials the\n      database or the broker refused at start",
        ] {
            assert!(text.contains(want), "{sub:?} --help: wants {want:?}:\n{text}");
        }
        let short = galewatch(&[sub, &["-h"]].concat(), &[]);
        let text = String::from_utf8_lossy(&short.stdout);
        assert!(
            short.status.success() && text.contains("Usage: galewatch"),
            "{sub:?}"
        );
        assert!(!text.contains("batch_max_readings"), "{sub:?} -h: {text}");
    }
    // The commands that read no settings file keep their help to their options.
    let text = galewatch(&["simulate", "--help"], &[]);
    assert!(!String::from_utf8_lossy(&text.stdout).contains("batch_max_readings"));
}

/// `--version` names the commit the binary was built from (what an operator reports with a bug);
/// the man pages and completions the package installs come from the same command line.
#[test]
fn the_version_names_the_commit_and_the_packaging_outputs_are_generated() {
    let out = galewatch(&["--version"], &[]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("git");
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    assert_eq!(head.len(), 12, "this checkout is a git repository");
    assert_eq!(
        text,
        format!("galewatch {} (commit {head})", env!("CARGO_PKG_VERSION"))
    );
    let dir = tempfile::tempdir().unwrap();
    let out = galewatch(&["manpages", dir.path().to_str().unwrap()], &[]);
    assert!(out.status.success(), "{out:?}");
    for page in [
        "galewatch.1",
        "galewatch-run.1",
        "galewatch-quarantine-resolve.1",
    ] {
        let roff = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(roff.starts_with(".ie") || roff.contains(".TH"), "{page}");
    }
    // A command's page: its synopsis names the command as it is typed, and the settings (each
    // with its default and variable), the environment, the files and the exit statuses follow.
    let run = std::fs::read_to_string(dir.path().join("galewatch-run.1")).unwrap();
    assert!(run.contains(".TH galewatch-run 1"), "{run}");
    assert!(
        run.contains(".SH SYNOPSIS\n\\fBgalewatch run\\fR"),
        "the synopsis names `galewatch run`:\n{run}"
    );
    for want in [
        ".SH SETTINGS",
        ".SS Database",
        "\\fBbatch_max_readings = 5000\\fR\n[GALEWATCH_BATCH_MAX_READINGS] A batch is written",
        "[GALEWATCH_DATABASE_PASSWORD or GALEWATCH_DATABASE_PASSWORD_FILE (a secret)]",
        ".SH ENVIRONMENT",
        "CREDENTIALS_DIRECTORY",
        ".SH FILES",
        "/etc/galewatch/credentials/",
        ".SH \"EXIT STATUS\"",
    ] {
        assert!(run.contains(want), "galewatch-run.1 wants {want:?}:\n{run}");
    }
    assert!(
        !run.contains(".SH EXTRA"),
        "the long help is not repeated raw"
    );
    let demo = std::fs::read_to_string(dir.path().join("galewatch-demo.1")).unwrap();
    assert!(
        !demo.contains(".SH SETTINGS"),
        "the demo reads no settings file"
    );
    assert!(
        std::fs::read_to_string(dir.path().join("galewatch.1"))
            .unwrap()
            .contains(".SH SETTINGS"),
        "man galewatch lists them too"
    );
    assert!(
        !dir.path().join("galewatch-help.1").exists(),
        "no page for clap's help"
    );
    let hidden = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.contains("manpages") || name.contains("completions")
        })
        .count();
    assert_eq!(
        hidden, 0,
        "the packaging commands have no pages of their own"
    );
    for (shell, marker) in [
        ("bash", "complete -F _galewatch"),
        ("zsh", "#compdef galewatch"),
        ("fish", "complete -c galewatch"),
    ] {
        let out = galewatch(&["completions", shell], &[]);
        assert!(out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(marker),
            "{shell}"
        );
    }
}

#[test]
fn a_bad_setting_names_itself_and_exits_2() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("GALEWATCH_BATCH_MAX_READINGS", "lots")],
            "batch_max_readings",
        ),
        (
            &[("GALEWATCH_MQTT_URL", "http://broker")],
            "GALEWATCH_MQTT_URL",
        ),
        (
            &[("GALEWATCH_MQTT_TOPIC", "turbines/#")],
            "GALEWATCH_MQTT_TOPIC",
        ),
        (&[("GALEWATCH_BATCH_MAX_WAIT", "soon")], "batch_max_wait"),
        (&[("GALEWATCH_BATCH_SIZE", "10")], "batch_size"),
        (
            &[("GALEWATCH_DATABASE_URL", "postgresql://h/")],
            "GALEWATCH_DATABASE_URL",
        ),
    ];
    for (env, named) in cases {
        let out = galewatch(&["run"], env);
        assert_eq!(out.status.code(), Some(2), "{env:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(named), "{env:?}: {err}");
        assert!(err.contains("invalid setting"), "{env:?}: {err}");
    }
    // A numeric client id is still a client id (it passes the settings and fails later, on
    // the unreachable database, not with exit 2).
    let out = galewatch(
        &["migrate"],
        &[
            ("GALEWATCH_MQTT_CLIENT_ID", "123"),
            (
                "GALEWATCH_DATABASE_URL",
                "postgresql://postgres@127.0.0.1:1/x",
            ),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = galewatch(&["run", "--config", "/nonexistent/galewatch.toml"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/galewatch.toml"));
}

#[test]
fn a_bad_key_in_the_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.toml");
    std::fs::write(&path, "batch_max_redings = 10\n").unwrap();
    let out = galewatch(&["run", "--config", path.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("batch_max_redings") && err.contains("unknown setting"),
        "{err}"
    );
}

#[tokio::test]
async fn migrate_is_safe_to_run_twice_and_run_works_from_the_example_file() {
    let db = TestDb::create().await;
    for _ in 0..2 {
        let out = galewatch(
            &[
                "migrate",
                "--config",
                concat!(env!("CARGO_MANIFEST_DIR"), "/config/galewatch.toml"),
            ],
            &[("GALEWATCH_DATABASE_URL", &db.url)],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(
        db.count("SELECT count(*) FROM refinery_schema_history")
            .await,
        migration_count(),
        "every migration applied once"
    );
    for table in [
        "readings",
        "quarantine",
        "rejected",
        "turbine_status",
        "quarantine_resolution",
        "readings_default",
        "galewatch_partition",
    ] {
        assert_eq!(db.count(&format!("SELECT count(*) FROM {table}")).await, 0);
    }
}

#[tokio::test]
async fn migrate_creates_a_missing_database() {
    let db = TestDb::create().await;
    admin_client()
        .await
        .batch_execute(&format!("DROP DATABASE {}", db.name))
        .await
        .unwrap();
    let out = galewatch(&["migrate"], &[("GALEWATCH_DATABASE_URL", &db.url)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("created the database"));
    assert_eq!(db.count("SELECT count(*) FROM readings").await, 0);
}

/// Every command refuses a misspelled `GALEWATCH_*` variable the same way `run` does (exit 2,
/// naming it), instead of `simulate` and `demo` ignoring it.
#[test]
fn every_command_refuses_a_misspelled_variable() {
    for args in [
        &["run"][..],
        &["migrate"],
        &["demo", "--duration", "1s"],
        &[
            "simulate",
            "--flood",
            "--readings",
            "1",
            "--mqtt-url",
            "mqtt://127.0.0.1:1",
        ],
        &["turbines"],
        &["rejected", "list"],
        &["quarantine", "list"],
        &["panel"],
        &["settings"],
    ] {
        let out = galewatch(args, &[("GALEWATCH_BATCH_MAX_READING", "10")]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("batch_max_reading") && err.contains("unknown setting"),
            "{args:?}: {err}"
        );
    }
}

/// `galewatch turbines | head -1`: the reader goes away after one line; the command exits 0
/// without a panic, whatever the size of its output.
#[tokio::test]
async fn a_reader_that_goes_away_is_no_error() {
    let db = TestDb::create().await;
    let out = galewatch(&["migrate"], &[("GALEWATCH_DATABASE_URL", &db.url)]);
    assert!(out.status.success());
    db.client()
        .await
        .batch_execute(
            "INSERT INTO turbine_status (turbine_id, first_seen, last_seen)
             SELECT 'WTG-' || i, now(), now() FROM generate_series(1, 20000) i",
        )
        .await
        .unwrap();
    for args in [
        &["turbines"][..],
        &["turbines", "--format", "json"],
        &["rejected", "list"],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_galewatch"))
            .args(args)
            .env_clear()
            .env("GALEWATCH_DATABASE_URL", &db.url)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Close our end at once, as `head` does once it has its line.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// The demo pointed at a broker that is not there says so and exits 2, with what to fix,
/// instead of "the invariant holds" on zero readings.
#[test]
fn the_demo_with_no_broker_at_its_url_exits_2_and_says_what_to_fix() {
    let port = free_port();
    let out = galewatch(
        &["demo", "--duration", "5s"],
        &[("GALEWATCH_MQTT_URL", &format!("mqtt://127.0.0.1:{port}"))],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}\n{err}");
    assert!(err.contains("no MQTT broker answers"), "{err}");
    assert!(err.contains("GALEWATCH_MQTT_URL"), "{err}");
    assert!(!text.contains("the invariant holds"), "{text}");
}

/// The same for a database URL where nothing listens: exit 2, the cause, and what to do.
#[test]
fn the_demo_with_no_database_at_its_url_exits_2_and_says_why() {
    let port = free_port();
    let out = galewatch(
        &["demo", "--duration", "5s"],
        &[(
            "GALEWATCH_DATABASE_URL",
            &format!("postgresql://postgres@127.0.0.1:{port}/x"),
        )],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("Connection refused"), "{err}");
    assert!(err.contains("GALEWATCH_DATABASE_URL"), "{err}");
}

/// `galewatch settings`: every setting in force with where it came from, one of each source
/// here: the default, the settings file, a variable, a secret's `_FILE` and a systemd credential.
#[test]
fn settings_shows_each_value_with_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("galewatch.toml");
    std::fs::write(
        &file,
        "mqtt_username = \"gw\"\nbatch_max_wait = \"250ms\"\n",
    )
    .unwrap();
    let file = std::fs::canonicalize(&file).unwrap();
    let creds = dir.path().join("creds");
    std::fs::create_dir(&creds).unwrap();
    std::fs::write(
        creds.join("galewatch_database_url"),
        "postgresql://gw@db.example:5432/galewatch\n",
    )
    .unwrap();
    let pw = dir.path().join("mqtt");
    std::fs::write(&pw, "x\n").unwrap();
    let env = [
        ("CREDENTIALS_DIRECTORY", creds.to_str().unwrap()),
        ("GALEWATCH_MQTT_PASSWORD_FILE", pw.to_str().unwrap()),
        ("GALEWATCH_BATCH_MAX_READINGS", "2000"),
        // Hostile text: an escape sequence and a line break, shown escaped, never raw.
        (
            "GALEWATCH_PAYLOAD_SITE_POINTER",
            "/site\u{1b}[2J\nfake_setting default 1",
        ),
    ];
    let out = galewatch(&["settings", "--config", file.to_str().unwrap()], &env);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = |key: &str| {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("no {key}:\n{text}"));
        line.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let file_text = file.display().to_string();
    assert_eq!(row("setting"), "setting from value");
    assert_eq!(
        row("mqtt_topic"),
        "mqtt_topic default \"turbines/+/readings\""
    );
    assert_eq!(
        row("mqtt_username"),
        format!("mqtt_username file {file_text} \"gw\"")
    );
    assert_eq!(
        row("batch_max_wait"),
        format!("batch_max_wait file {file_text} \"250ms\"")
    );
    assert_eq!(
        row("batch_max_readings"),
        "batch_max_readings env GALEWATCH_BATCH_MAX_READINGS 2000"
    );
    assert_eq!(
        row("mqtt_password"),
        "mqtt_password file via GALEWATCH_MQTT_PASSWORD_FILE \"****\""
    );
    assert_eq!(
        row("database_url"),
        "database_url credential database_url \"postgresql://gw@db.example:5432/galewatch\""
    );
    assert_eq!(
        row("payload_turbine_topic_level"),
        "payload_turbine_topic_level default (unset)"
    );
    assert!(
        !text.contains('\u{1b}') && text.lines().all(|l| !l.starts_with("fake_setting")),
        "{text}"
    );
    assert_eq!(
        text.lines().count(),
        galewatch::daemon::reference::settings().len() + 1,
        "a header and one line a setting"
    );

    // As a settings file: run with it alone, the same values (the secret stays where it was).
    let toml = galewatch(
        &[
            "settings",
            "--config",
            file.to_str().unwrap(),
            "--format",
            "toml",
        ],
        &env,
    );
    assert!(toml.status.success());
    let copy = dir.path().join("copy.toml");
    std::fs::write(&copy, &toml.stdout).unwrap();
    // `galewatch settings --config FILE --format json` with `env`, parsed.
    let json = |file: &std::path::Path, env: &[(&str, &str)]| -> serde_json::Value {
        let args = [
            "settings",
            "--config",
            file.to_str().unwrap(),
            "--format",
            "json",
        ];
        let out = galewatch(&args, env);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let before = json(&file, &env);
    // The copy alone, with the secrets where they were (the credential, the _FILE).
    let after = json(&copy, &env[..2]);
    for (key, v) in before.as_object().unwrap() {
        assert_eq!(after[key]["value"], v["value"], "{key}");
        if key != "database_url" && key != "mqtt_password" {
            let from = after[key]["from"].as_str().unwrap();
            assert!(
                from == "default" || from.starts_with("file "),
                "{key}: {from}"
            );
        }
    }
    assert_eq!(after["batch_max_readings"]["value"], 2000);
    assert_eq!(
        after["mqtt_password"]["from"],
        "file via GALEWATCH_MQTT_PASSWORD_FILE"
    );

    // It checks the settings as `run` does: exit 2, the setting named.
    let out = galewatch(&["settings"], &[("GALEWATCH_BATCH_MAX_READINGS", "0")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid setting `batch_max_readings`"));
    assert!(out.stdout.is_empty());
}

/// Standard error or output a closed pipe (`galewatch … 2>&1 | head -0`): the command still ends
/// with its own exit status, not a panic's 101. Each command below writes to the closed stream.
#[test]
fn a_closed_pipe_for_output_changes_no_exit_status() {
    let bin = env!("CARGO_BIN_EXE_galewatch");
    let closed = || {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        writer
    };
    // An unreadable --config: each says so on standard error and exits 2.
    let cases: [(&[&str], i32); 4] = [
        (&["run", "--config", "/nonexistent/galewatch.toml"], 2),
        (&["migrate", "--config", "/nonexistent/galewatch.toml"], 2),
        (&["settings", "--config", "/nonexistent/galewatch.toml"], 2),
        (&["export", "--config", "/nonexistent/galewatch.toml"], 2),
    ];
    for (args, code) in cases {
        let out = Command::new(bin)
            .args(args)
            .stderr(closed())
            .stdout(std::process::Stdio::null())
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(code), "{args:?} with stderr closed");
    }
    // Help goes to standard output.
    let out = Command::new(bin)
        .args(["--help"])
        .stdout(closed())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "--help with stdout closed");
}

/// The daemon's own log lines to a closed pipe (`galewatch migrate 2>&1 | head -0`): each is
/// dropped and the command ends as it would have (tracing-subscriber's report of the failed write
/// panicked: exit 101).
#[tokio::test]
async fn logging_to_a_closed_pipe_changes_no_exit_status() {
    let db = TestDb::create().await;
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .arg("migrate")
        .env("GALEWATCH_DATABASE_URL", &db.url)
        .stderr(writer)
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "migrate logging to a closed pipe"
    );
    assert!(
        db.count("SELECT count(*) FROM refinery_schema_history")
            .await
            > 0,
        "it migrated"
    );
}
