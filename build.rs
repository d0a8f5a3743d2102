//! Sets `cfg(linux_extras)` where the store may use what only Linux offers: page-cache hints
//! (`posix_fadvise`), the memory cgroup and `/proc` readings its memory defaults start from,
//! huge pages for large filters, glibc's allocator settings and the background threads'
//! niceness. Everywhere else, and on Linux with the `portable` feature (which the tests run
//! once, so that the fallbacks are built and tested here), the fallbacks stand in.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(linux_extras)");
    println!("cargo::rerun-if-changed=build.rs");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let portable = std::env::var_os("CARGO_FEATURE_PORTABLE").is_some();
    if linux && !portable {
        println!("cargo::rustc-cfg=linux_extras");
    }
}
