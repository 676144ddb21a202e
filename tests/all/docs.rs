//! The README and the pages of docs/ as a newcomer reads them: every
//! `moat` command in their `sh` blocks, copied as written, is one the real
//! `moat` takes (run from an empty directory, it gets as far as reading its
//! component: a renamed or misspelled flag fails here); every page's
//! Contents lists its headings; every relative link leads to a file.

use std::path::PathBuf;
use std::process::Command;

use crate::outside::root;

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

/// The README, every page of docs/ and the recipes' README.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![
        root().join("README.md"),
        root().join("examples/foreign/README.md"),
    ];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The fenced blocks of `lang` in `text`.
fn blocks<'t>(text: &'t str, lang: &str) -> Vec<&'t str> {
    let fence = format!("```{lang}\n");
    text.split(&fence)
        .skip(1)
        .map(|rest| &rest[..rest.find("```").expect("a closed block")])
        .collect()
}

/// The commands of a `sh` block: comments and blank lines dropped, a
/// continued line (`\` at its end) joined to the next, a `$ ` prompt
/// taken off.
fn commands(block: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        let line = line.trim();
        if current.is_empty() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        let line = line.strip_prefix("$ ").unwrap_or(line);
        match line.strip_suffix('\\') {
            Some(more) => {
                current.push_str(more);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                commands.push(std::mem::take(&mut current));
            }
        }
    }
    commands
}

/// A command line's words, as a shell splits one without quotes,
/// variables or globs (what the docs' `moat` lines use).
fn words(command: &str) -> Vec<String> {
    command.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn every_moat_command_in_the_docs_is_one_moat_takes() {
    let empty = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("docs-commands");
    let _ = std::fs::remove_dir_all(&empty);
    std::fs::create_dir_all(&empty).unwrap();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for block in blocks(&text, "sh") {
            for command in commands(block) {
                let words = words(&command);
                if words.first().map(String::as_str) != Some("moat") {
                    continue;
                }
                if words
                    .iter()
                    .any(|w| w.contains(['|', '>', '<', '$', '"', '\'']))
                {
                    wrong.push(format!(
                        "{}: not a plain command: {command}",
                        page.display()
                    ));
                    continue;
                }
                // The directories it gives the guest are there, empty.
                for dir in words.iter().filter_map(|w| w.strip_prefix("--dir=")) {
                    let host = dir.split("::").next().unwrap_or(dir);
                    let host = host
                        .strip_suffix(":rw")
                        .or(host.strip_suffix(":ro"))
                        .unwrap_or(host);
                    std::fs::create_dir_all(empty.join(host)).unwrap();
                }
                let out = Command::new(MOAT)
                    .args(&words[1..])
                    .current_dir(&empty)
                    .env_remove("RUST_LOG")
                    .output()
                    .expect("moat runs");
                let stderr = String::from_utf8_lossy(&out.stderr);
                // From an empty directory the component is not there: a
                // command moat takes stops at reading it, exit status 1..
                let took = stderr.contains("cannot read") && stderr.contains("No such file");
                if !took {
                    wrong.push(format!(
                        "{}: `{command}` (exit {:?}):\n{stderr}",
                        page.display(),
                        out.status.code()
                    ));
                }
                checked += 1;
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked >= 20, "only {checked} moat commands found");
    eprintln!("{checked} moat commands checked");
}

/// A heading's anchor as GitHub makes it.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The `##` and `###` headings of `text`, outside fenced blocks.
fn headings(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut found = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if fenced {
            continue;
        }
        if let Some(h) = line
            .strip_prefix("## ")
            .or_else(|| line.strip_prefix("### "))
        {
            found.push(h.trim().to_owned());
        }
    }
    found
}

#[test]
fn every_page_of_docs_lists_its_headings_and_its_links_lead_somewhere() {
    let mut wrong = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        let headings = headings(&text);
        let listed = text.contains("**Contents**") || text.contains("**Contents:**");
        if headings.len() >= 2 && page.starts_with(root().join("docs")) {
            if !listed {
                wrong.push(format!(
                    "{name}: {} headings and no Contents",
                    headings.len()
                ));
            }
            for heading in &headings {
                let link = format!("](#{})", anchor(heading));
                if !text.contains(&link) {
                    wrong.push(format!("{name}: Contents lacks {heading:?} ({link})"));
                }
            }
        }
        let dir = page.parent().unwrap();
        for piece in text.split("](").skip(1) {
            let Some(end) = piece.find(')') else { continue };
            let target = &piece[..end];
            if target.starts_with("http") || target.starts_with('#') || target.contains(' ') {
                continue;
            }
            let path = target.split('#').next().unwrap();
            if !dir.join(path).exists() {
                wrong.push(format!("{name}: a link to {target}, which is not there"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
