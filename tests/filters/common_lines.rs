//! The `common_lines` example's logic (included from the example itself), checked against
//! exact expected output on small files.

#[allow(dead_code)]
#[path = "../../examples/common_lines.rs"]
mod example;

use std::collections::HashSet;
use std::fs;

use example::{common_lines, common_lines_hashset, generate, generated_line};

fn lines(v: &[&str]) -> Vec<Vec<u8>> {
    v.iter().map(|s| s.as_bytes().to_vec()).collect()
}

#[test]
fn shared_lines_once_each_in_file_b_order() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    fs::write(
        &a,
        "apple\nbanana\n\ncherry\nbanana\nfig\r\nlast-no-newline",
    )
    .unwrap();
    fs::write(
        &b,
        "cherry\nkiwi\nbanana\ncherry\n\nfig\napple\nlast-no-newline\n",
    )
    .unwrap();
    let expected = lines(&["cherry", "banana", "", "fig", "apple", "last-no-newline"]);
    for rate in [0.01, 0.5] {
        let report = common_lines(&a, &b, rate).unwrap();
        assert_eq!(report.common, expected, "rate {rate}");
        assert_eq!((report.lines_a, report.lines_b), (7, 8));
        assert!(report.candidates >= expected.len() as u64);
    }
    assert_eq!(common_lines_hashset(&a, &b).unwrap(), expected);
}

#[test]
fn no_shared_lines_and_empty_files() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, empty) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("e"),
    );
    fs::write(&a, "one\ntwo\n").unwrap();
    fs::write(&b, "three\nfour\n").unwrap();
    fs::write(&empty, "").unwrap();
    assert!(common_lines(&a, &b, 0.01).unwrap().common.is_empty());
    assert!(common_lines(&empty, &b, 0.01).unwrap().common.is_empty());
    assert!(common_lines(&a, &empty, 0.01).unwrap().common.is_empty());
    assert!(common_lines_hashset(&a, &b).unwrap().is_empty());
    assert!(common_lines(&a, &dir.path().join("missing"), 0.01).is_err());
    assert!(common_lines(&a, &b, 0.0).is_err());
}

#[test]
fn generated_pair_has_the_announced_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let n = 5_000;
    let (a, b, shared) = generate(dir.path(), n).unwrap();
    assert_eq!(shared, 500);
    // Every tenth line of b.txt, in order, is one of the last 500 lines of a.txt.
    let expected: Vec<Vec<u8>> = (n - shared..n)
        .map(|i| generated_line(i).into_bytes())
        .collect();
    let distinct: HashSet<String> = (0..2 * n).map(generated_line).collect();
    assert_eq!(distinct.len(), 2 * n as usize);
    // A high rate forces many false candidates: the verification pass must drop them all.
    for rate in [0.01, 0.3] {
        let report = common_lines(&a, &b, rate).unwrap();
        assert_eq!(report.common, expected, "rate {rate}");
        assert_eq!((report.lines_a, report.lines_b), (n, n));
        if rate == 0.3 {
            assert!(report.candidates > shared + 500, "{}", report.candidates);
        }
    }
    assert_eq!(common_lines_hashset(&a, &b).unwrap(), expected);
}
