//! The outputs the documentation quotes as exact are the programs' outputs: each test runs the
//! program's code (the example's file, compiled in as a module) and compares what it prints
//! with the quoted block.

use std::path::Path;

// The example's own code, compiled into this test: its `main` goes unused here.
#[allow(dead_code)]
#[path = "../../examples/crawler_frontier.rs"]
mod crawler_frontier;

/// The first block of lines indented by `indent` spaces after `heading_line` in `doc`,
/// unindented.
fn quoted_block_after(doc: &str, heading_line: &str, indent: usize) -> Vec<String> {
    let start = doc
        .find(heading_line)
        .expect("the heading of the quoted output");
    let prefix = " ".repeat(indent);
    doc[start..]
        .lines()
        .skip(1)
        .skip_while(|l| !l.starts_with(&prefix))
        .take_while(|l| l.starts_with(&prefix))
        .map(|l| l[indent..].to_string())
        .collect()
}

#[test]
fn crawler_frontier_prints_what_docs_examples_quotes() {
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/examples.md"))
            .unwrap();
    let quoted = quoted_block_after(&docs, "The first prints", 6);
    assert!(quoted.len() >= 8, "{quoted:?}");
    let report = crawler_frontier::crawl(&crawler_frontier::Options::default()).unwrap();
    assert!(report.warning.is_none());
    let printed = report.lines;
    assert_eq!(printed, quoted);
}

/// The README's example is `examples/quick_start.rs` (which `cargo test` compiles) word for
/// word, so it cannot stop compiling unnoticed.
#[test]
fn the_readme_example_is_the_quick_start_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let start = readme
        .find("```rust\n")
        .expect("a Rust block in the README")
        + "```rust\n".len();
    let end = start + readme[start..].find("```\n").unwrap();
    let example = std::fs::read_to_string(root.join("examples/quick_start.rs")).unwrap();
    assert_eq!(&readme[start..end], example);
}
