//! Manual: the man pages, one per command, generated from the command line (clap_mangen) with
//! the settings' reference (SETTINGS, ENVIRONMENT, FILES, EXIT STATUS) in the pages of the
//! commands that read settings.

use std::io::{self, Write};
use std::path::Path;

use roff::{bold, roman, Roff};

use crate::daemon::reference::{after_settings, grouped, SETTINGS_INTRO};

/// Writes `galewatch.1` and one page per visible subcommand (`galewatch-run.1`,
/// `galewatch-quarantine-list.1`, …) into `dir`, as clap names them, so that each page's
/// SUBCOMMANDS section points at pages that exist. Returns how many it wrote.
pub fn write_pages(cmd: clap::Command, dir: &Path) -> io::Result<usize> {
    // Built once from the top, each subcommand knows its synopsis name (`galewatch run`) and its
    // page's (`galewatch-run`). No page for clap's own `help` subcommand.
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    walk(&cmd, true, dir)
}

fn walk(cmd: &clap::Command, top: bool, dir: &Path) -> io::Result<usize> {
    let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name());
    std::fs::write(dir.join(format!("{name}.1")), page(cmd, top)?)?;
    let mut pages = 1;
    for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
        pages += walk(sub, false, dir)?;
    }
    Ok(pages)
}

/// One page. The settings' sections go in the top page and in those of the commands whose long
/// help lists the settings; clap_mangen's own EXTRA section (the long help's text) is left out.
pub fn page(cmd: &clap::Command, top: bool) -> io::Result<Vec<u8>> {
    // Every page's footer names the program and its version (not the subcommand's bare name).
    let man = clap_mangen::Man::new(cmd.clone())
        .source(format!("galewatch {}", env!("CARGO_PKG_VERSION")));
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut out)?;
    }
    if cmd.get_subcommands().any(|c| !c.is_hide_set()) {
        man.render_subcommands_section(&mut out)?;
    }
    if top || cmd.get_after_long_help().is_some() {
        settings_sections(&mut out)?;
    }
    if cmd.get_version().is_some() {
        man.render_version_section(&mut out)?;
    }
    Ok(out)
}

/// SETTINGS (by group: each with its default, variables and meaning), ENVIRONMENT, FILES and
/// EXIT STATUS, from the settings' reference.
fn settings_sections(w: &mut dyn Write) -> io::Result<()> {
    let mut r = Roff::new();
    // No hyphenation: variable names and paths are copied from here.
    r.control("nh", []);
    r.control("SH", ["SETTINGS"]);
    r.text([roman(SETTINGS_INTRO)]);
    for (group, entries) in grouped() {
        r.control("SS", [group]);
        for e in entries {
            r.control("TP", []);
            r.text([bold(e.term())]);
            r.text([roman(format!("[{}] {}", e.variables(), e.meaning))]);
        }
    }
    for (title, items) in after_settings() {
        r.control("SH", [title.to_uppercase().as_str()]);
        for i in items {
            r.control("TP", []);
            r.text([bold(i.term)]);
            r.text([roman(i.text)]);
        }
    }
    r.to_writer(w)
}
