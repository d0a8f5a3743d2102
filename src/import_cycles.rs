//! The crate's top-level modules form layers: a module never reaches, through the modules it
//! names in its code, back to itself. The read path reads top-down (`db` -> `version` ->
//! `sstable` -> `filter`, block and index), and a module can be read knowing only those below
//! it. This test reads `src/` and fails on the first cycle it finds, naming the files that
//! make each step of it. Comments, doc links and test modules do not count: only code.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<PathBuf>>>;

/// The top-level modules of `src` and the `.rs` files of each.
fn modules(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut modules = BTreeMap::new();
    for entry in fs::read_dir(src).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            modules.insert(name, rust_files(&path));
        } else if let Some(stem) = name.strip_suffix(".rs") {
            if stem != "lib" && stem != "main" {
                modules.insert(stem.to_string(), vec![path]);
            }
        }
    }
    modules
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// A file's code: without its test module (by convention last, after `#[cfg(test)]`), whole
/// test files and comments.
fn code_of(path: &Path) -> String {
    if path.file_name().is_some_and(|n| n == "tests.rs") {
        return String::new();
    }
    let text = fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => &text[..],
    };
    let code_of_line = |line: &str| match line.find("//") {
        Some(at) => line[..at].to_string(),
        None => line.to_string(),
    };
    text.lines()
        .map(code_of_line)
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The names the crate root re-exports (`pub use module::{Name, ...}` in `lib.rs`), each with
/// the module it comes from: `crate::Name` reaches that module.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut reexports = BTreeMap::new();
    for (at, _) in lib.match_indices("pub use ") {
        let statement = &lib[at + "pub use ".len()..];
        let statement = &statement[..statement.find(';').unwrap_or(statement.len())];
        let words = identifiers(statement);
        let Some(((module, _), rest)) = words.split_first() else {
            continue;
        };
        // Exported: each name that ends a path (not followed by `::`) and is not renamed,
        // and each new name after `as`.
        for (i, (word, followed_by_path)) in rest.iter().enumerate() {
            let renamed = rest.get(i + 1).is_some_and(|(next, _)| next == "as");
            if !followed_by_path && !renamed && word != "as" && word != "self" {
                reexports.insert(word.clone(), module.clone());
            }
        }
    }
    reexports
}

/// The identifiers of `text` in order, each with whether `::` follows it.
fn identifiers(text: &str) -> Vec<(String, bool)> {
    let mut words = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(is_ident) {
        let after = &rest[start..];
        let len = after.find(|c| !is_ident(c)).unwrap_or(after.len());
        let followed_by_path = after[len..].trim_start().starts_with("::");
        words.push((after[..len].to_string(), followed_by_path));
        rest = &after[len..];
    }
    words
}

/// The top-level modules `code` names: `crate::name` anywhere (a name the root re-exports
/// standing for its module), and each first name inside a `use crate::{...}` group.
fn named_modules(code: &str, reexports: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        // `crate` as a word of its own, not the end of another name.
        if code[..at].ends_with(|c: char| is_ident(c) || c == ':') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            names.extend(first_names_in_group(group));
        } else {
            let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
            names.insert(name);
        }
    }
    names
        .into_iter()
        .map(|name| reexports.get(&name).cloned().unwrap_or(name))
        .collect()
}

/// The first name of each item of a brace group up to its closing brace (`a, b::{c, d}, e`
/// gives `a`, `b` and `e`).
fn first_names_in_group(group: &str) -> Vec<String> {
    let mut names = Vec::new();
    let (mut depth, mut at_item_start) = (0, true);
    let mut chars = group.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => at_item_start = true,
            c if at_item_start && is_ident(c) => {
                let name: String = group[i..].chars().take_while(|&c| is_ident(c)).collect();
                for _ in 1..name.chars().count() {
                    chars.next();
                }
                names.push(name);
                at_item_start = false;
            }
            _ => {}
        }
    }
    names
}

fn graph(src: &Path) -> Graph {
    let modules = modules(src);
    let reexports = root_reexports(&code_of(&src.join("lib.rs")));
    let mut graph = Graph::new();
    for (module, files) in &modules {
        let edges = graph.entry(module.clone()).or_default();
        for file in files {
            for named in named_modules(&code_of(file), &reexports) {
                if &named != module && modules.contains_key(&named) {
                    let relative = file.strip_prefix(src).unwrap_or(file);
                    edges
                        .entry(named)
                        .or_default()
                        .insert(relative.to_path_buf());
                }
            }
        }
    }
    graph
}

/// A cycle of modules, as the path from a module back to itself, if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        graph: &Graph,
        module: &str,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(module.to_string(), Mark::Open);
        path.push(module.to_string());
        for next in graph[module].keys() {
            match marks.get(next) {
                Some(Mark::Open) => {
                    let start = path.iter().position(|m| m == next).unwrap();
                    let mut cycle = path[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(Mark::Done) => {}
                None => {
                    if let Some(cycle) = visit(graph, next, marks, path) {
                        return Some(cycle);
                    }
                }
            }
        }
        path.pop();
        marks.insert(module.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for module in graph.keys() {
        if !marks.contains_key(module) {
            if let Some(cycle) = visit(graph, module, &mut marks, &mut Vec::new()) {
                return Some(cycle);
            }
        }
    }
    None
}

#[test]
fn no_module_reaches_back_to_itself() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph(&src);
    assert!(graph.len() > 20, "read {} modules", graph.len());
    if let Some(cycle) = find_cycle(&graph) {
        let steps: Vec<String> = (cycle.windows(2))
            .map(|step| {
                let files = &graph[&step[0]][&step[1]];
                format!("{} -> {} (in {files:?})", step[0], step[1])
            })
            .collect();
        panic!("an import cycle:\n{}", steps.join("\n"));
    }
}

#[test]
fn the_reader_finds_the_names_code_uses_and_a_cycle_made_of_them() {
    let code = "use crate::a::X;\nuse crate::{b, c::{D, E}, f};\nlet g = crate::g::new();\n\
                let h: crate::H = my_crate::z::W;";
    let lib = "pub use h::{H, I as J};\npub use k::K;";
    let reexports = root_reexports(lib);
    let expected = [("H", "h"), ("J", "h"), ("K", "k")];
    assert_eq!(
        reexports,
        expected.map(|(a, b)| (a.into(), b.into())).into()
    );
    let names: Vec<String> = named_modules(code, &reexports).into_iter().collect();
    assert_eq!(names, ["a", "b", "c", "f", "g", "h"]);

    let edge = |to: &str| (to.to_string(), BTreeSet::from([PathBuf::from("x.rs")]));
    let mut graph = Graph::new();
    graph.insert("a".into(), BTreeMap::from([edge("b")]));
    graph.insert("b".into(), BTreeMap::from([edge("c")]));
    graph.insert("c".into(), BTreeMap::new());
    assert_eq!(find_cycle(&graph), None);
    graph.get_mut("c").unwrap().extend([edge("a")]);
    assert_eq!(find_cycle(&graph).unwrap(), ["a", "b", "c", "a"]);
}
