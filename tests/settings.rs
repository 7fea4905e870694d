//! The settings' doors, tried as an outside tester did (`galewatch settings`, which loads and
//! checks the settings as `run` does, without connecting): a variable spelt in lower case or
//! holding bytes that are not UTF-8, an old bound beside declared signals, a value refused with
//! where it came from, a file that does not parse, a secret's `_FILE` written as a key, a path
//! that holds a line break, and values of a feature that is off.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

/// `galewatch settings ARGS` with `env` (and no other `GALEWATCH_` variable): (exit code,
/// stdout, stderr).
fn settings(args: &[&str], env: &[(&OsStr, &OsStr)]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_galewatch"));
    c.arg("settings").args(args);
    for (k, _) in std::env::vars_os() {
        if k.as_bytes().starts_with(b"GALEWATCH_") {
            c.env_remove(k);
        }
    }
    let out = c.envs(env.iter().copied()).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn var<'a>(k: &'a str, v: &'a str) -> (&'a OsStr, &'a OsStr) {
    (OsStr::new(k), OsStr::new(v))
}

fn file(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn shipped() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("config/galewatch.toml")
        .display()
        .to_string()
}

#[test]
fn a_variable_is_the_key_in_upper_case_and_nothing_else() {
    let (code, _, err) = settings(&[], &[var("GALEWATCH_batch_max_readings", "7")]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("GALEWATCH_batch_max_readings")
            && err.contains("GALEWATCH_BATCH_MAX_READINGS"),
        "{err}"
    );
    // Two spellings of one variable cannot settle silently which wins.
    let (code, _, err) = settings(
        &[],
        &[
            var("GALEWATCH_BATCH_MAX_READINGS", "9"),
            var("GALEWATCH_Batch_Max_Readings", "7"),
        ],
    );
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = settings(&[], &[var("GALEWATCH_", "5")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a setting's variable"), "{err}");
    let (code, out, err) = settings(&[], &[var("GALEWATCH_BATCH_MAX_READINGS", "7")]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("batch_max_readings"), "{out}");
}

#[test]
fn a_value_that_is_not_utf8_is_refused_not_altered() {
    let bytes = OsStr::from_bytes(b"Top\xffSecret");
    for name in ["GALEWATCH_MQTT_PASSWORD", "GALEWATCH_MQTT_CLIENT_ID"] {
        let (code, out, err) = settings(
            &[],
            &[
                var("GALEWATCH_MQTT_USERNAME", "u"),
                (OsStr::new(name), bytes),
            ],
        );
        assert_eq!(code, 2, "{name}: {out}{err}");
        assert!(err.contains(name) && err.contains("not UTF-8"), "{err}");
        assert!(!err.contains("Top") && !out.contains("Top"), "{err}");
    }
}

#[test]
fn an_old_bound_beside_given_signals_is_refused_even_when_they_are_the_defaults() {
    // The shipped file declares the default signals: the old bound cannot quietly change them.
    let (code, _, err) = settings(
        &["--config", &shipped()],
        &[var("GALEWATCH_POWER_KW_MIN", "-5000")],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("power_kw_min") && err.contains("give min and max there"),
        "{err}"
    );
    // Without a file that gives them, the old bound still applies to the default list.
    let (code, out, err) = settings(&[], &[var("GALEWATCH_POWER_KW_MIN", "-5000")]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("-5000"), "{out}");
    // The bound at fault is the one named.
    let dir = tempfile::tempdir().unwrap();
    let f = file(dir.path(), "inf.toml", "power_kw_max = inf\n");
    let (code, _, err) = settings(&["--config", &f], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("`power_kw_max`"), "{err}");
}

#[test]
fn a_refused_value_says_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(dir.path(), "zero.toml", "batch_max_readings = 0\n");
    let (code, _, err) = settings(&["--config", &f], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("from file {f}")), "{err}");
    let (code, _, err) = settings(&[], &[var("GALEWATCH_BATCH_MAX_READINGS", "0")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("from GALEWATCH_BATCH_MAX_READINGS"), "{err}");
    // A secret from its file is blamed on the file's variable.
    let pw = file(dir.path(), "pw", "s3cret\n");
    let (code, _, err) = settings(&[], &[var("GALEWATCH_MQTT_PASSWORD_FILE", &pw)]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("GALEWATCH_MQTT_PASSWORD_FILE"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
}

#[test]
fn a_file_that_does_not_parse_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(dir.path(), "broken.toml", "batch_max_readings = \n");
    let (code, _, err) = settings(&["--config", &f], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&f) && !err.contains("(in )"), "{err}");
}

#[test]
fn a_secret_file_is_a_variable_not_a_key_and_near_names_are_suggested() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(
        dir.path(),
        "key.toml",
        "mqtt_password_file = \"/etc/hostname\"\n",
    );
    let (code, _, err) = settings(&["--config", &f], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("GALEWATCH_MQTT_PASSWORD_FILE") && !err.contains("did you mean"),
        "{err}"
    );
    for (typo, meant) in [
        ("GALEWATCH_DATABASE_URL_FIL", "GALEWATCH_DATABASE_URL_FILE"),
        (
            "GALEWATCH_MQTT_PASSWORDFILE",
            "GALEWATCH_MQTT_PASSWORD_FILE",
        ),
        (
            "GALEWATCH_MQTT_PASWORD_FILE",
            "GALEWATCH_MQTT_PASSWORD_FILE",
        ),
        ("GALEWATCH_BATCH_MAX_READNGS", "batch_max_readings"),
    ] {
        let (code, _, err) = settings(&[], &[var(typo, "x")]);
        assert_eq!(code, 2, "{typo}: {err}");
        assert!(
            err.contains(&format!("did you mean `{meant}`")),
            "{typo}: {err}"
        );
    }
}

#[test]
fn a_path_with_a_line_break_stays_in_its_comment() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(
        dir.path(),
        "evil\nbatch_max_readings = 7\n#.toml",
        "mqtt_client_id = \"x\"\n",
    );
    let (code, out, err) = settings(&["--config", &f, "--format", "toml"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.lines().any(|l| l.trim() == "batch_max_readings = 7"),
        "{out}"
    );
    // What it wrote reads back.
    let back = file(dir.path(), "back.toml", &out);
    let (code, again, err) = settings(&["--config", &back, "--format", "toml"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(again.contains("mqtt_client_id = \"x\""), "{again}");
}

#[test]
fn values_of_a_feature_that_is_off_are_still_checked() {
    let dir = tempfile::tempdir().unwrap();
    for (toml, setting) in [
        (
            "sparkplug_rebirths_per_second = nan",
            "sparkplug_rebirths_per_second",
        ),
        (
            "sparkplug_births_cache_bytes = 1000",
            "sparkplug_births_cache_bytes",
        ),
        (
            "sparkplug_metrics = { x = \"nosuchsignal\" }",
            "sparkplug_metrics",
        ),
        (
            "availability_available = [\"full_performance\", \"bogus\"]",
            "availability_available",
        ),
        ("mqtt_keep_alive = \"5500ms\"", "mqtt_keep_alive"),
        ("mqtt_session_expiry = \"1500ms\"", "mqtt_session_expiry"),
    ] {
        let f = file(dir.path(), "off.toml", &format!("{toml}\n"));
        let (code, _, err) = settings(&["--config", &f], &[]);
        assert_eq!(code, 2, "{toml}: {err}");
        assert!(err.contains(&format!("`{setting}`")), "{toml}: {err}");
    }
}

#[test]
fn a_variable_nested_past_reason_is_refused_not_a_stack_overflow() {
    let deep = "[".repeat(5000);
    for name in [
        "GALEWATCH_SIGNALS",
        "GALEWATCH_BATCH_MAX_READINGS",
        "GALEWATCH_NO_SUCH",
    ] {
        let (code, _, err) = settings(&[], &[var(name, &deep)]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains("deeper than 32"), "{name}: {err}");
    }
    // A text setting's variable is its text, brackets and all: not parsed, so not refused.
    let (code, out, err) = settings(&[], &[var("GALEWATCH_MQTT_CLIENT_ID", &deep)]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("[[[["), "{out}");
}

#[test]
fn the_old_bound_given_is_the_one_named_and_the_toml_reads_back_with_it() {
    let (code, _, err) = settings(
        &["--config", &shipped()],
        &[var("GALEWATCH_ROTOR_RPM_MAX", "5")],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("`rotor_rpm_max`") && err.contains("from GALEWATCH_ROTOR_RPM_MAX"),
        "{err}"
    );
    // With the signals left at their default, the file written reads back with the bound.
    let (code, out, err) = settings(
        &["--format", "toml"],
        &[var("GALEWATCH_POWER_KW_MIN", "-5")],
    );
    assert_eq!(code, 0, "{err}");
    let dir = tempfile::tempdir().unwrap();
    let back = file(dir.path(), "back.toml", &out);
    let (code, again, err) = settings(&["--config", &back, "--format", "toml"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(again.contains("power_kw_min = -5.0"), "{again}");
}

#[test]
fn a_path_in_an_error_stays_on_its_line() {
    let (code, _, err) = settings(&["--config", "/nope\ngalewatch: all settings OK"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        !err.lines()
            .any(|l| l.starts_with("galewatch: all settings OK")),
        "{err}"
    );
    let (code, _, err) = settings(
        &[],
        &[var("GALEWATCH_MQTT_PASSWORD_FILE", "/nope\ninjected line")],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        !err.lines().any(|l| l.starts_with("injected line")),
        "{err}"
    );
}

#[test]
fn what_the_database_url_says_is_blamed_on_the_url() {
    let (code, _, err) = settings(
        &[],
        &[var(
            "GALEWATCH_DATABASE_URL",
            "postgresql://u@h/db?sslmode=bogus",
        )],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("`database_url`")
            && err.contains("sslmode=")
            && err.contains("from GALEWATCH_DATABASE_URL"),
        "{err}"
    );
    let (code, _, err) = settings(
        &[],
        &[var(
            "GALEWATCH_DATABASE_URL",
            "postgresql://u@h/db?sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem",
        )],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("`database_url`") && err.contains("sslrootcert"),
        "{err}"
    );
    // The file's own setting still names itself, and --config's errors say both ways to give it.
    let (code, _, err) = settings(&["--config", "/nonexistent/galewatch.toml"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--config or GALEWATCH_CONFIG"), "{err}");
}
