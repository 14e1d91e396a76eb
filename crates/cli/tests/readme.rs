//! The README is where a new user starts: it must lead to every command `reblock --help`
//! lists, to every page in docs/, and to the Python package.

use std::path::PathBuf;

use assert_cmd::Command;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The subcommand names of `reblock --help` (the lines of its Commands section).
fn subcommands() -> Vec<String> {
    let out = Command::cargo_bin("reblock")
        .unwrap()
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("    "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

#[test]
fn the_readme_names_every_command_every_doc_page_and_the_python_package() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let commands = subcommands();
    assert!(commands.len() > 10, "{commands:?}");
    let missing: Vec<&String> = commands
        .iter()
        .filter(|c| {
            let shown = [format!("reblock {c}"), format!("-- {c}"), format!("`{c}`")];
            !shown.iter().any(|s| readme.contains(s.as_str()))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "commands the README never shows: {missing:?}"
    );

    let mut pages = Vec::new();
    for entry in std::fs::read_dir(workspace().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") && !readme.contains(&format!("docs/{name}")) {
            pages.push(name);
        }
    }
    assert!(
        pages.is_empty(),
        "docs/ pages the README never names: {pages:?}"
    );

    assert!(workspace().join("python/README.md").is_file());
    assert!(
        readme.contains("pip install ./python"),
        "the Python package"
    );
}
