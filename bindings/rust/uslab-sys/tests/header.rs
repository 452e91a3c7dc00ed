//! The declarations in src/lib.rs against include/uslab.h: every function the
//! header exports (USLAB_API) is declared with the same parameter and return
//! types, and nothing else is; every numeric #define and enum constant has
//! the same value; the structures have the C compiler's sizes and offsets
//! (layout.c). A change to the header that the declarations do not follow
//! fails here.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::fs;
use std::mem::{align_of, offset_of, size_of};
use std::path::PathBuf;

fn read(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel);
    fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn strip_c_comments(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        let j = rest[i..].find("*/").expect("unterminated comment");
        rest = &rest[i + j + 2..];
    }
    out.push_str(rest);
    out.lines().map(|l| l.split("//").next().unwrap()).collect::<Vec<_>>().join("\n")
}

/// Splits at top-level commas (function-pointer types hold their own).
fn split_top(s: &str) -> Vec<String> {
    let (mut depth, mut cur, mut out) = (0i32, String::new(), Vec::new());
    let mut prev = ' ';
    for c in s.chars() {
        match c {
            '(' | '<' => depth += 1,
            '>' if prev == '-' => {} // a return arrow
            ')' | '>' => depth -= 1,
            _ => {}
        }
        prev = c;
        if c == ',' && depth == 0 {
            out.push(cur.trim().to_string());
            cur.clear();
        } else {
            cur.push(c);
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// A C parameter or return type without its name, spaces removed; function
/// pointers (and the header's typedef of one) are "fnptr".
fn c_type(decl: &str) -> String {
    let d = decl.trim();
    if d.contains("(*") || d.starts_with("uslab_report_fn") {
        return "fnptr".into();
    }
    let toks: Vec<&str> = d.split_whitespace().collect();
    let mut t = d.to_string();
    if toks.len() >= 2 {
        // The last identifier is the name, unless the declaration is a bare type.
        let last = toks.last().unwrap().trim_start_matches('*');
        if !last.is_empty() && last.chars().all(|c| c.is_alphanumeric() || c == '_') {
            t = d[..d.rfind(last).unwrap()].to_string();
        }
    }
    squash(&t)
}

fn header_functions() -> BTreeMap<String, (String, Vec<String>)> {
    let h = strip_c_comments(&read("csrc/include/uslab.h"));
    let mut out = BTreeMap::new();
    let mut rest = h.as_str();
    // Past the macro's own definition.
    rest = &rest[rest.find("struct kmem_cache;").expect("struct kmem_cache;")..];
    while let Some(i) = rest.find("USLAB_API") {
        rest = &rest[i + "USLAB_API".len()..];
        let end = rest.find(';').unwrap();
        let decl = rest[..end].replace("USLAB_MALLOC_ATTR", "");
        let decl = decl.trim();
        // name( ... ) : the first '(' preceded by an identifier that is not "(*".
        let open = decl.find('(').unwrap();
        let close = decl.rfind(')').unwrap();
        let head = decl[..open].trim();
        let name_start = head.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |k| k + 1);
        let name = head[name_start..].to_string();
        let ret = squash(&head[..name_start]);
        let params = &decl[open + 1..close];
        let ps: Vec<String> =
            if squash(params) == "void" { vec![] } else { split_top(params).iter().map(|p| c_type(p)).collect() };
        out.insert(name, (ret, ps));
    }
    out
}

/// The C type a Rust type of the declarations stands for, spaces removed.
fn rust_to_c(t: &str) -> String {
    let t = t.trim();
    if t.starts_with("Option<unsafe extern \"C\" fn") || t == "uslab_report_fn" {
        return "fnptr".into();
    }
    if let Some(inner) = t.strip_prefix("*mut ") {
        return format!("{}*", rust_to_c(inner));
    }
    if let Some(inner) = t.strip_prefix("*const ") {
        let i = rust_to_c(inner);
        // "const char *" and "const char *const *" as C spells them.
        return if i.ends_with('*') { format!("{i}const*") } else { format!("const{i}*") };
    }
    match t {
        "c_char" => "char",
        "c_int" => "int",
        "c_uint" => "unsignedint",
        "c_ulong" => "unsignedlong",
        "usize" => "size_t",
        "c_void" => "void",
        "gfp_t" => "gfp_t",
        "slab_flags_t" => "slab_flags_t",
        "FILE" => "FILE",
        "kmem_cache" | "slab_sheaf" | "kmem_cache_args" | "uslab_slabinfo" | "uslab_rcu_stats" | "rcu_head"
        | "rcu_flavor_struct" => return format!("struct{t}"),
        other => panic!("no C type known for Rust type {other}"),
    }
    .into()
}

fn rust_functions() -> BTreeMap<String, (String, Vec<String>)> {
    let src = read("src/lib.rs");
    let start = src.find("extern \"C\" {").unwrap();
    let block = &src[start..];
    let block = &block[..block.find("\n}\n").unwrap()];
    let mut out = BTreeMap::new();
    for item in block.split(';') {
        let Some(i) = item.find("pub fn ") else { continue };
        let item = squash_lines(&item[i + 7..]);
        let open = item.find('(').unwrap();
        let name = item[..open].trim().to_string();
        // The parameter list's closing parenthesis (fn types nest).
        let mut depth = 0;
        let mut close = open;
        for (k, c) in item[open..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        close = open + k;
                        break;
                    }
                }
                _ => {}
            }
        }
        let params: Vec<String> = split_top(&item[open + 1..close])
            .iter()
            .map(|p| rust_to_c(p.split_once(':').expect("name: type").1))
            .collect();
        let ret = match item[close + 1..].trim().strip_prefix("->") {
            Some(r) => rust_to_c(r),
            None => "void".into(),
        };
        out.insert(name, (ret, params));
    }
    out
}

fn squash_lines(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What the header (c) and src/lib.rs (r) say differently: names in one only,
/// and names whose values differ.
fn disagreements<V: PartialEq + std::fmt::Debug>(c: &BTreeMap<String, V>, r: &BTreeMap<String, V>) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, v) in c {
        match r.get(name) {
            None => problems.push(format!("{name} ({v:?}): in uslab.h, not in src/lib.rs")),
            Some(rv) if rv != v => problems.push(format!("{name}: C {v:?}, Rust {rv:?}")),
            _ => {}
        }
    }
    for name in r.keys().filter(|n| !c.contains_key(*n)) {
        problems.push(format!("{name}: in src/lib.rs, not in uslab.h"));
    }
    problems
}

#[test]
fn functions_match_the_header() {
    let c = header_functions();
    let r = rust_functions();
    assert!(c.len() >= 45, "the header parse found only {} functions", c.len());
    let problems = disagreements(&c, &r);
    assert!(problems.is_empty(), "declarations disagree with include/uslab.h:\n{}", problems.join("\n"));
}

fn parse_int(v: &str) -> Option<i64> {
    let v = v.trim().trim_start_matches('(').trim_end_matches(')').trim_end_matches(['U', 'u', 'L', 'l']);
    if let Some(h) = v.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()
    } else {
        v.parse().ok()
    }
}

#[test]
fn constants_match_the_header() {
    let h = strip_c_comments(&read("csrc/include/uslab.h"));
    let mut c = BTreeMap::new();
    for line in h.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("#define ") {
            let mut it = rest.splitn(2, char::is_whitespace);
            let (name, val) = (it.next().unwrap(), it.next().unwrap_or(""));
            if let Some(v) = parse_int(val) {
                c.insert(name.to_string(), v);
            }
        }
    }
    // enum uslab_error: sequential from its first member's value.
    let e = &h[h.find("enum uslab_error {").unwrap()..];
    let e = &e[e.find('{').unwrap() + 1..e.find('}').unwrap()];
    let mut next = 0i64;
    for m in e.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let (name, v) = match m.split_once('=') {
            Some((n, v)) => (n.trim(), parse_int(v).unwrap()),
            None => (m, next),
        };
        c.insert(name.to_string(), v);
        next = v + 1;
    }
    let src = read("src/lib.rs");
    let mut r = BTreeMap::new();
    for line in src.lines() {
        if let Some(rest) = line.trim().strip_prefix("pub const ") {
            let (name, rest) = rest.split_once(':').unwrap();
            let val = rest.split_once('=').unwrap().1.trim().trim_end_matches(';');
            if val.contains(" as ") {
                continue; // a pointer constant: layout.c's entry, checked below
            }
            r.insert(name.trim().to_string(), parse_int(val).unwrap_or_else(|| panic!("{name}: {val}")));
        }
    }
    assert!(c.len() >= 30, "the header parse found only {} constants", c.len());
    let problems = disagreements(&c, &r);
    assert!(problems.is_empty(), "constants disagree with include/uslab.h:\n{}", problems.join("\n"));
}

#[test]
fn structures_match_the_compiler() {
    use uslab_sys::{kmem_cache_args as A, uslab_slabinfo as S};
    let rust: BTreeMap<&str, u64> = [
        ("sizeof kmem_cache_args", size_of::<A>()),
        ("alignof kmem_cache_args", align_of::<A>()),
        ("kmem_cache_args.align", offset_of!(A, align)),
        ("kmem_cache_args.useroffset", offset_of!(A, useroffset)),
        ("kmem_cache_args.usersize", offset_of!(A, usersize)),
        ("kmem_cache_args.freeptr_offset", offset_of!(A, freeptr_offset)),
        ("kmem_cache_args.use_freeptr_offset", offset_of!(A, use_freeptr_offset)),
        ("kmem_cache_args.ctor", offset_of!(A, ctor)),
        ("kmem_cache_args.sheaf_capacity", offset_of!(A, sheaf_capacity)),
        ("sizeof uslab_slabinfo", size_of::<S>()),
        ("alignof uslab_slabinfo", align_of::<S>()),
        ("uslab_slabinfo.active_objs", offset_of!(S, active_objs)),
        ("uslab_slabinfo.num_objs", offset_of!(S, num_objs)),
        ("uslab_slabinfo.objsize", offset_of!(S, objsize)),
        ("uslab_slabinfo.objperslab", offset_of!(S, objperslab)),
        ("uslab_slabinfo.pagesperslab", offset_of!(S, pagesperslab)),
        ("uslab_slabinfo.limit", offset_of!(S, limit)),
        ("uslab_slabinfo.batchcount", offset_of!(S, batchcount)),
        ("uslab_slabinfo.sharedfactor", offset_of!(S, sharedfactor)),
        ("uslab_slabinfo.active_slabs", offset_of!(S, active_slabs)),
        ("uslab_slabinfo.num_slabs", offset_of!(S, num_slabs)),
        ("uslab_slabinfo.sharedavail", offset_of!(S, sharedavail)),
        ("sizeof uslab_rcu_stats", size_of::<uslab_sys::uslab_rcu_stats>()),
        ("uslab_rcu_stats.waits", offset_of!(uslab_sys::uslab_rcu_stats, waits)),
        ("uslab_rcu_stats.slabs_waiting", offset_of!(uslab_sys::uslab_rcu_stats, slabs_waiting)),
        ("uslab_rcu_stats.flavor_set", offset_of!(uslab_sys::uslab_rcu_stats, flavor_set)),
        ("sizeof enum uslab_error", size_of::<uslab_sys::uslab_error>()),
        ("sizeof gfp_t", size_of::<uslab_sys::gfp_t>()),
        ("sizeof slab_flags_t", size_of::<uslab_sys::slab_flags_t>()),
        ("ZERO_SIZE_PTR", uslab_sys::ZERO_SIZE_PTR as usize),
    ]
    .into_iter()
    .map(|(k, v)| (k, v as u64))
    .collect();
    let mut c = BTreeMap::new();
    unsafe {
        let mut e = uslab_sys::layout::uslab_sys_layout.as_ptr();
        while !(*e).name.is_null() {
            c.insert(CStr::from_ptr((*e).name).to_str().unwrap().to_string(), (*e).value);
            e = e.add(1);
        }
    }
    assert_eq!(c.len(), rust.len(), "layout.c and this test list different entries");
    for (k, v) in &rust {
        assert_eq!(c.get(*k), Some(v), "{k}: C says {:?}, Rust {v}", c.get(*k));
    }
}

/// The parsers themselves: a declaration changed in a copy of the header is
/// seen (so the tests above can fail).
#[test]
fn a_changed_prototype_is_seen() {
    assert_eq!(c_type("const char *name"), "constchar*");
    assert_eq!(c_type("void (*ctor)(void *)"), "fnptr");
    assert_eq!(c_type("struct slab_sheaf **sheafp"), "structslab_sheaf**");
    assert_eq!(c_type("const char *const *"), "constchar*const*");
    assert_eq!(rust_to_c("*const *const c_char"), "constchar*const*");
    assert_eq!(rust_to_c("*mut *mut slab_sheaf"), "structslab_sheaf**");
    let r = rust_functions();
    assert_eq!(r["kmalloc"], ("void*".to_string(), vec!["size_t".to_string(), "gfp_t".to_string()]));
    let c = header_functions();
    assert_eq!(c["kmalloc"], r["kmalloc"]);
    assert_ne!(c["kmem_cache_alloc_node"], r["kmem_cache_alloc"]);
}
