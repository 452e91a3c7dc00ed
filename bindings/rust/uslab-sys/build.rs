//! Builds uslab's core library (the kmem_cache and kmalloc API, without the
//! malloc override: the Rust program's own malloc stays the C library's) from
//! the C sources under csrc/, with the flags the project's CMakeLists.txt
//! gives them. The source list is read from that CMakeLists.txt
//! (`set(USLAB_SOURCES ...)`), so the two builds cannot drift apart.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

fn sources(csrc: &Path) -> Vec<PathBuf> {
    let cmake = fs::read_to_string(csrc.join("CMakeLists.txt")).expect("csrc/CMakeLists.txt");
    let start = cmake.find("set(USLAB_SOURCES").expect("set(USLAB_SOURCES in CMakeLists.txt");
    let body = &cmake[start + "set(USLAB_SOURCES".len()..];
    let end = body.find(')').expect("end of USLAB_SOURCES");
    let mut list: Vec<PathBuf> =
        body[..end].split_whitespace().filter(|s| s.ends_with(".c")).map(|s| csrc.join(s)).collect();
    // Not a sanitizer build: vfork and clone wrappers (CMakeLists.txt adds
    // them the same way).
    list.push(csrc.join("src/platform/vfork.c"));
    assert!(list.len() > 10, "USLAB_SOURCES looks empty");
    list
}

/// The optional libraries are loaded with dlopen at run time; only their
/// headers are needed here (CMakeLists.txt's check_include_file).
fn have_header(name: &str) -> bool {
    let triple_dir = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86_64-linux-gnu",
        Ok("aarch64") => "aarch64-linux-gnu",
        _ => "",
    };
    ["/usr/include", "/usr/local/include"]
        .iter()
        .flat_map(|d| [PathBuf::from(d).join(name), PathBuf::from(d).join(triple_dir).join(name)])
        .any(|p| p.is_file())
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let csrc = manifest.join("csrc");
    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        panic!("uslab-sys: uslab runs on Linux only (rseq, the page provider's mappings)");
    }
    let srcs = sources(&csrc);
    let mut b = cc::Build::new();
    b.files(&srcs)
        .file(manifest.join("layout.c"))
        .include(csrc.join("include"))
        .include(csrc.join("src"))
        .std("gnu11")
        .pic(true)
        .opt_level(3)
        .debug(true)
        .warnings(false)
        .define("NDEBUG", None)
        .flag("-fvisibility=hidden")
        .flag("-ftls-model=initial-exec");
    if env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64") {
        b.flag("-mcx16");
    }
    let no_optional = env::var_os("USLAB_SYS_NO_OPTIONAL").is_some();
    for (header, def) in [
        ("libunwind.h", "USLAB_HAVE_LIBUNWIND"),
        ("elfutils/libdwfl.h", "USLAB_HAVE_LIBDW"),
        ("numaif.h", "USLAB_HAVE_LIBNUMA"),
        ("urcu/flavor.h", "USLAB_HAVE_LIBURCU"),
    ] {
        if !no_optional && have_header(header) {
            b.define(def, Some("1"));
        }
    }
    b.compile("uslab-core");
    println!("cargo:rustc-link-lib=dylib=pthread");
    println!("cargo:rustc-link-lib=dylib=dl");
    println!("cargo:include={}", csrc.join("include").display());
    println!("cargo:rerun-if-changed=layout.c");
    println!("cargo:rerun-if-changed=csrc/CMakeLists.txt");
    println!("cargo:rerun-if-changed=csrc/include");
    println!("cargo:rerun-if-changed=csrc/src");
    println!("cargo:rerun-if-env-changed=USLAB_SYS_NO_OPTIONAL");
    for s in &srcs {
        println!("cargo:rerun-if-changed={}", s.display());
    }
}
