//! C structs, enums and constants through bindgen, then reshaped for the project:
//! primitive integer types instead of `c_*`, zerocopy derives where the layout allows,
//! size and alignment assertions taken from clang's layout, flexible arrays as `[T; 0]`,
//! bitfields as plain byte arrays with safe accessors (no `unsafe` in generated code).

use anyhow::{Context, Result, bail};
use quote::{format_ident, quote};
use std::collections::BTreeMap;
use std::path::Path;
use syn::visit_mut::VisitMut;

/// Kernel types and macros the headers expect, passed to clang with `-include`.
pub const PRELUDE: &str = r#"
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
typedef uint8_t u8; typedef uint16_t u16; typedef uint32_t u32; typedef uint64_t u64;
typedef int8_t s8; typedef int16_t s16; typedef int32_t s32; typedef int64_t s64;
typedef uint16_t __le16; typedef uint32_t __le32; typedef uint64_t __le64;
typedef uint8_t __u8; typedef uint16_t __u16; typedef uint32_t __u32; typedef uint64_t __u64;
/* A zero-length array has the layout of the flexible array and stays zerocopy-friendly. */
#define DECLARE_FLEX_ARRAY(T, name) T name[0]
#define __packed __attribute__((packed))
/* amdgpu builds for little-endian CPUs; discovery.h declares ip_v4's sub_revision/variant
   byte only when this is defined, so without it ip_v4 loses a byte. */
#define LITTLEENDIAN_CPU
#define __printf(a, b)
#define BIT(n) (1UL << (n))
struct mutex { int opaque; };
typedef uint64_t resource_size_t;
"#;

/// What to bind from one header.
pub struct Spec<'a> {
    /// Header path relative to `drivers/gpu/drm/amd`.
    pub header: &'a str,
    /// File name patterns (regex) whose items are kept.
    pub files: &'a [&'a str],
    /// Items (types, functions, variables) dropped: kernel bookkeeping with pointers.
    pub block: &'a [&'a str],
    /// Further headers (relative to `drivers/gpu/drm/amd`) bound together with `header`.
    pub also: &'a [&'a str],
}

/// Runs bindgen over one header and returns the reshaped Rust source (no file header).
pub fn bind(amd: &Path, prelude: &Path, spec: &Spec) -> Result<String> {
    let header = amd.join(spec.header);
    // `T name[]` would become bindgen's non-Copy `__IncompleteArrayField`, which also turns
    // every union holding such a struct into an opaque blob; `[0]` has the same layout.
    let text = std::fs::read(&header).with_context(|| format!("read {}", header.display()))?;
    let mut text = String::from_utf8_lossy(&text).replace("[];", "[0];");
    for extra in spec.also {
        text.push_str(&format!("\n#include \"{}\"\n", amd.join(extra).display()));
    }
    let mut b = bindgen::Builder::default()
        .header_contents(&header.to_string_lossy(), &text)
        .clang_arg("-include")
        .clang_arg(prelude.to_string_lossy())
        .clang_arg(format!("-I{}", amd.join("include").display()))
        .clang_arg(format!("-I{}", amd.join("amdgpu").display()))
        .clang_arg(format!("-I{}", amd.join("pm/swsmu/inc/pmfw_if").display()))
        .clang_arg("--target=x86_64-unknown-linux-gnu")
        .clang_arg("-Wno-visibility")
        .use_core()
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .explicit_padding(true)
        .derive_debug(true)
        .derive_copy(true)
        .derive_default(false)
        .layout_tests(true)
        .generate_comments(true)
        .with_codegen_config(bindgen::CodegenConfig::TYPES | bindgen::CodegenConfig::VARS)
        .formatter(bindgen::Formatter::None);
    for f in spec.files {
        b = b.allowlist_file(*f);
    }
    for i in spec.block {
        b = b.blocklist_item(*i).blocklist_type(*i);
    }
    let raw = b
        .generate()
        .map_err(|e| anyhow::anyhow!("bindgen on {}: {e}", spec.header))?
        .to_string();
    if let Ok(dir) = std::env::var("AM_AUTOGEN_RAW") {
        let name = spec.header.replace('/', "_");
        let _ = std::fs::write(Path::new(&dir).join(format!("{name}.rs")), &raw);
    }
    let file: syn::File =
        syn::parse_str(&raw).with_context(|| format!("parse bindgen output of {}", spec.header))?;
    reshape(file, spec.header)
}

/// Layout facts clang gave bindgen, read back from its layout tests.
#[derive(Default)]
struct Layouts {
    size: BTreeMap<String, usize>,
    align: BTreeMap<String, usize>,
}

fn read_layout_test(item: &syn::ItemConst, l: &mut Layouts) {
    let text = quote!(#item).to_string();
    // `["Size of T"][::core::mem::size_of::<T>() - 64usize];`
    for stmt in text.split(';') {
        let grab = |key: &str| -> Option<(String, usize)> {
            let start = stmt.find(key)? + key.len();
            let rest = &stmt[start..];
            let ty_end = rest.find('"')?;
            let ty = rest[..ty_end].trim().to_string();
            let minus = rest.rfind(" - ")?;
            let num: String = rest[minus + 3..]
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            Some((ty, num.parse().ok()?))
        };
        if let Some((t, n)) = grab("\"Size of ") {
            l.size.insert(t, n);
        } else if let Some((t, n)) = grab("\"Alignment of ") {
            l.align.insert(t, n);
        }
    }
}

fn is_layout_test(item: &syn::Item) -> bool {
    if let syn::Item::Const(c) = item {
        return c.ident == "_";
    }
    false
}

/// Maps `core::ffi::c_*` to Rust primitives and bindgen's helper types to plain arrays.
struct Prims;

impl VisitMut for Prims {
    fn visit_type_mut(&mut self, ty: &mut syn::Type) {
        if let syn::Type::Path(p) = ty
            && let Some(last) = p.path.segments.last()
        {
            let prim = match last.ident.to_string().as_str() {
                "c_uchar" => Some("u8"),
                "c_char" | "c_schar" => Some("i8"),
                "c_ushort" => Some("u16"),
                "c_short" => Some("i16"),
                "c_uint" => Some("u32"),
                "c_int" => Some("i32"),
                "c_ulong" | "c_ulonglong" => Some("u64"),
                "c_long" | "c_longlong" => Some("i64"),
                _ => None,
            };
            if let Some(prim) = prim {
                let id = format_ident!("{prim}");
                *ty = syn::parse_quote!(#id);
                return;
            }
            let helper =
                last.ident == "__BindgenBitfieldUnit" || last.ident == "__IncompleteArrayField";
            if helper
                && let syn::PathArguments::AngleBracketed(a) = &last.arguments
                && let Some(syn::GenericArgument::Type(inner)) = a.args.first()
            {
                let inner = inner.clone();
                *ty = if last.ident == "__BindgenBitfieldUnit" {
                    inner
                } else {
                    syn::parse_quote!([#inner; 0])
                };
                self.visit_type_mut(ty);
                return;
            }
        }
        syn::visit_mut::visit_type_mut(self, ty);
    }
}

/// Writes constants of 256 and above in hex, as the headers mostly do.
struct HexConsts;

impl VisitMut for HexConsts {
    fn visit_item_const_mut(&mut self, c: &mut syn::ItemConst) {
        if let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) = &mut *c.expr
            && let Ok(v) = i.base10_parse::<u64>()
            && v >= 256
        {
            *i = syn::LitInt::new(&format!("{v:#x}"), i.span());
        }
    }
}

/// A bitfield accessor bindgen generated: unit field, bit offset, width, value type.
struct Bitfield {
    name: String,
    unit: String,
    offset: usize,
    width: usize,
    ty: syn::Type,
}

fn read_bitfield_getter(f: &syn::ImplItemFn) -> Option<Bitfield> {
    if f.sig.inputs.len() != 1 || f.sig.unsafety.is_some() {
        return None;
    }
    let syn::ReturnType::Type(_, ty) = &f.sig.output else {
        return None;
    };
    let body = quote!(#f).to_string();
    // `self . _bitfield_1 . get (4usize , 4u8)`
    let at = body.find("self . _bitfield_")? + "self . ".len();
    let rest = &body[at..];
    let unit: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    // `get (OFF usize , W u8)` or, in newer bindgen, `get_const :: < OFF usize , W u8 > ()`.
    let args = if let Some(i) = rest.find(". get_const :: <") {
        &rest[i + ". get_const :: <".len()..]
    } else {
        &rest[rest.find(". get (")? + ". get (".len()..]
    };
    let nums: Vec<usize> = args
        .split([',', ')', '>'])
        .take(2)
        .map(|s| {
            s.trim()
                .trim_end_matches("usize")
                .trim_end_matches("u8")
                .trim()
                .parse()
                .ok()
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Bitfield {
        name: f.sig.ident.to_string(),
        unit,
        offset: nums[0],
        width: nums[1],
        ty: (**ty).clone(),
    })
}

/// bindgen falls back to a struct of `__BindgenUnionField<T>` when a member was not `Copy`
/// (flexible arrays); once those are `[T; 0]` a plain `union` is right again.
fn real_union(st: &syn::ItemStruct) -> Option<syn::ItemUnion> {
    let mut fields = Vec::new();
    let mut is_union = false;
    for f in &st.fields {
        let ty = &f.ty;
        let text = quote!(#ty).to_string();
        if text.starts_with("__BindgenOpaqueArray")
            || f.ident.as_ref().is_some_and(|i| i == "bindgen_union_field")
        {
            continue;
        }
        if !text.starts_with("__BindgenUnionField") {
            return None;
        }
        is_union = true;
        let syn::Type::Path(p) = ty else { return None };
        let syn::PathArguments::AngleBracketed(a) = &p.path.segments.last()?.arguments else {
            return None;
        };
        let Some(syn::GenericArgument::Type(inner)) = a.args.first() else {
            return None;
        };
        let mut f = f.clone();
        f.ty = inner.clone();
        fields.push(f);
    }
    if !is_union {
        return None;
    }
    let ident = &st.ident;
    // Keeps `repr(C, packed)` where C packs the union.
    let attrs: Vec<&syn::Attribute> = st
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc") || a.path().is_ident("repr"))
        .collect();
    Some(syn::parse_quote! {
        #(#attrs)*
        pub union #ident { #(#fields),* }
    })
}

/// Size in bytes and zerocopy capabilities (FromBytes, IntoBytes) of a field type.
#[derive(Clone, Copy)]
struct Cap {
    size: Option<usize>,
    /// No union inside, so `Debug` derives.
    debug: bool,
    from_bytes: bool,
    into_bytes: bool,
}

fn cap_of(
    ty: &syn::Type,
    types: &BTreeMap<String, Cap>,
    aliases: &BTreeMap<String, syn::Type>,
) -> Cap {
    match ty {
        syn::Type::Array(a) => {
            let inner = cap_of(&a.elem, types, aliases);
            let n = match &a.len {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Int(i),
                    ..
                }) => i.base10_parse::<usize>().ok(),
                _ => None,
            };
            Cap {
                size: inner.size.zip(n).map(|(s, n)| s * n),
                ..inner
            }
        }
        syn::Type::Path(p) => {
            let name = p
                .path
                .segments
                .last()
                .map(|s| s.ident.to_string())
                .unwrap_or_default();
            let prim = match name.as_str() {
                "u8" | "i8" => Some(1),
                "u16" | "i16" => Some(2),
                "u32" | "i32" | "f32" => Some(4),
                "u64" | "i64" | "f64" => Some(8),
                _ => None,
            };
            if let Some(s) = prim {
                return Cap {
                    size: Some(s),
                    debug: true,
                    from_bytes: true,
                    into_bytes: true,
                };
            }
            if let Some(t) = aliases.get(&name) {
                return cap_of(t, types, aliases);
            }
            types.get(&name).copied().unwrap_or(Cap {
                size: None,
                debug: false,
                from_bytes: false,
                into_bytes: false,
            })
        }
        _ => Cap {
            size: None,
            debug: false,
            from_bytes: false,
            into_bytes: false,
        },
    }
}

fn reshape(mut file: syn::File, header: &str) -> Result<String> {
    let mut layouts = Layouts::default();
    for item in &file.items {
        if let syn::Item::Const(c) = item
            && c.ident == "_"
        {
            read_layout_test(c, &mut layouts);
        }
    }
    let helper = |name: &str| name.starts_with("__Bindgen") || name == "__IncompleteArrayField";
    file.items.retain(|item| match item {
        syn::Item::Struct(s) => !helper(&s.ident.to_string()),
        syn::Item::Impl(i) => {
            let t = &i.self_ty;
            let t = quote!(#t).to_string();
            !(t.starts_with("__Bindgen") || t.starts_with("__IncompleteArrayField"))
                && i.trait_.is_none()
        }
        // bindgen renames a `u8` typedef to `u8_`; the primitive serves.
        syn::Item::Type(t) => !matches!(
            t.ident.to_string().as_str(),
            "u8_" | "u16_" | "u32_" | "u64_"
        ),
        other => !is_layout_test(other),
    });
    for item in file.items.iter_mut() {
        if let syn::Item::Struct(st) = item
            && let Some(u) = real_union(st)
        {
            *item = syn::Item::Union(u);
        }
    }
    Prims.visit_file_mut(&mut file);
    HexConsts.visit_file_mut(&mut file);

    let mut aliases = BTreeMap::new();
    for item in &file.items {
        if let syn::Item::Type(t) = item {
            aliases.insert(t.ident.to_string(), (*t.ty).clone());
        }
    }
    // bindgen emits anonymous inner types after the type holding them: iterate until the
    // capabilities stop changing.
    let mut caps: BTreeMap<String, Cap> = BTreeMap::new();
    let mut derives: BTreeMap<String, (bool, bool, bool)> = BTreeMap::new();
    loop {
        let before = derives.clone();
        for item in &file.items {
            let (name, fields, is_union) = match item {
                syn::Item::Struct(s) => (
                    s.ident.to_string(),
                    s.fields.iter().map(|f| f.ty.clone()).collect::<Vec<_>>(),
                    false,
                ),
                syn::Item::Union(u) => (
                    u.ident.to_string(),
                    u.fields.named.iter().map(|f| f.ty.clone()).collect(),
                    true,
                ),
                _ => continue,
            };
            let size = layouts.size.get(&name).copied();
            let fcaps: Vec<Cap> = fields.iter().map(|t| cap_of(t, &caps, &aliases)).collect();
            let from_bytes = fcaps.iter().all(|c| c.from_bytes);
            let sum: Option<usize> = fcaps.iter().map(|c| c.size).sum();
            // zerocopy derives IntoBytes on a struct only without padding: the field sizes
            // must add up to the C size (bindgen made inner and trailing padding explicit).
            let into_bytes = !is_union
                && from_bytes
                && fcaps.iter().all(|c| c.into_bytes)
                && sum.is_some()
                && sum == size;
            let debug = !is_union && fcaps.iter().all(|c| c.debug);
            caps.insert(
                name.clone(),
                Cap {
                    size,
                    debug,
                    from_bytes,
                    into_bytes,
                },
            );
            derives.insert(name, (debug, from_bytes, into_bytes));
        }
        if before == derives {
            break;
        }
    }

    let flat = flat_layouts(&file.items, &layouts);

    let mut out_items: Vec<syn::Item> = Vec::new();
    let mut uses_bitfields = false;
    for item in file.items {
        match item {
            syn::Item::Struct(mut s) => {
                let name = s.ident.to_string();
                let dwords = layouts.size.get(&name).map(|n| n / 4);
                let big = flat.get(&name).filter(|f| f.len() > DWORD_ARRAY_MIN_FIELDS);
                if let (Some(fields), Some(n)) = (big, dwords) {
                    // zerocopy's FromBytes derive grows quadratically in the field count (its
                    // per-field impls are overlap-checked pairwise): a 512-field MQD costs
                    // seconds. Such all-dword structs become one `[u32; N]` with named
                    // accessors, which derive in constant time.
                    let attrs: Vec<&syn::Attribute> = s
                        .attrs
                        .iter()
                        .filter(|a| a.path().is_ident("doc") || a.path().is_ident("repr"))
                        .collect();
                    let ident = &s.ident;
                    let mut st: syn::ItemStruct = syn::parse_quote! {
                        #(#attrs)*
                        pub struct #ident {
                            /// The descriptor as dwords; use the named accessors.
                            pub dw: [u32; #n],
                        }
                    };
                    add_derives(&mut st.attrs, Some((true, true, true)));
                    out_items.push(syn::Item::Struct(st));
                    let mut fns = Vec::new();
                    for (field, at) in fields {
                        let getter = format_ident!("{field}");
                        let setter = format_ident!("set_{field}");
                        let doc = format!("Dword {at} (`{field}`).");
                        fns.push(quote! {
                            #[doc = #doc]
                            pub const fn #getter(&self) -> u32 { self.dw[#at] }
                            #[doc = #doc]
                            pub fn #setter(&mut self, val: u32) { self.dw[#at] = val; }
                        });
                    }
                    out_items.push(syn::parse_quote! { impl #ident { #(#fns)* } });
                    push_asserts(&mut out_items, &name, &layouts, header)?;
                    continue;
                }
                add_derives(&mut s.attrs, derives.get(&name).copied());
                out_items.push(syn::Item::Struct(s));
                push_asserts(&mut out_items, &name, &layouts, header)?;
            }
            syn::Item::Union(mut u) => {
                let name = u.ident.to_string();
                add_derives(&mut u.attrs, derives.get(&name).copied());
                out_items.push(syn::Item::Union(u));
                push_asserts(&mut out_items, &name, &layouts, header)?;
            }
            syn::Item::Impl(i) => {
                // Only bitfield accessors live in inherent impls; rebuild them safely.
                let self_ty = i.self_ty.clone();
                let mut fns: Vec<proc_macro2::TokenStream> = Vec::new();
                for it in &i.items {
                    if let syn::ImplItem::Fn(f) = it
                        && let Some(bf) = read_bitfield_getter(f)
                    {
                        uses_bitfields = true;
                        let getter = format_ident!("{}", bf.name);
                        let setter = format_ident!("set_{}", bf.name);
                        let unit = format_ident!("{}", bf.unit);
                        let (off, width, ty) = (bf.offset, bf.width, bf.ty);
                        let doc = format!("Bits {}..{} of `{}`.", off, off + width, bf.unit);
                        fns.push(quote! {
                            #[doc = #doc]
                            pub const fn #getter(&self) -> #ty {
                                bitfield_get(&self.#unit, #off, #width) as #ty
                            }
                            #[doc = #doc]
                            pub fn #setter(&mut self, val: #ty) {
                                bitfield_set(&mut self.#unit, #off, #width, val as u64)
                            }
                        });
                    }
                }
                if !fns.is_empty() {
                    out_items.push(syn::parse_quote! { impl #self_ty { #(#fns)* } });
                }
            }
            other => out_items.push(other),
        }
    }
    if uses_bitfields {
        out_items.push(syn::parse_quote! {
            /// Reads `width` bits at bit `offset` of a little-endian bitfield unit.
            const fn bitfield_get(unit: &[u8], offset: usize, width: usize) -> u64 {
                let mut v = 0u64;
                let mut i = 0;
                while i < width {
                    let bit = offset + i;
                    if unit[bit / 8] & (1 << (bit % 8)) != 0 {
                        v |= 1 << i;
                    }
                    i += 1;
                }
                v
            }
        });
        out_items.push(syn::parse_quote! {
            /// Writes `width` bits at bit `offset` of a little-endian bitfield unit.
            fn bitfield_set(unit: &mut [u8], offset: usize, width: usize, val: u64) {
                for i in 0..width {
                    let bit = offset + i;
                    if val & (1 << i) != 0 {
                        unit[bit / 8] |= 1 << (bit % 8);
                    } else {
                        unit[bit / 8] &= !(1 << (bit % 8));
                    }
                }
            }
        });
    }
    let file = syn::File {
        shebang: None,
        attrs: vec![],
        items: out_items,
    };
    let text = prettyplease::unparse(&file);
    if text.contains("unsafe") {
        bail!("{header}: generated code still contains `unsafe`");
    }
    Ok(text)
}

/// Structs with more fields than this, all dwords, become `[u32; N]` with accessors.
const DWORD_ARRAY_MIN_FIELDS: usize = 64;

/// For every struct or union made only of `u32` fields (directly or through nested
/// anonymous structs and unions), its fields as (name, dword index), first name wins.
fn flat_layouts(items: &[syn::Item], l: &Layouts) -> BTreeMap<String, Vec<(String, usize)>> {
    let mut out: BTreeMap<String, Vec<(String, usize)>> = BTreeMap::new();
    // Inner anonymous types come after their users: iterate until nothing new resolves.
    loop {
        let before = out.len();
        for item in items {
            let (name, fields, is_union) = match item {
                syn::Item::Struct(s) => (
                    s.ident.to_string(),
                    s.fields.iter().collect::<Vec<_>>(),
                    false,
                ),
                syn::Item::Union(u) => (u.ident.to_string(), u.fields.named.iter().collect(), true),
                _ => continue,
            };
            if out.contains_key(&name) {
                continue;
            }
            let mut flat: Vec<(String, usize)> = Vec::new();
            let mut at = 0usize;
            let mut ok = true;
            for f in fields {
                let Some(fname) = f.ident.as_ref().map(|i| i.to_string()) else {
                    ok = false;
                    break;
                };
                let ty = &f.ty;
                let tname = quote!(#ty).to_string();
                let (entries, size): (Vec<(String, usize)>, usize) = if tname == "u32" {
                    (vec![(fname, 0)], 1)
                } else if let (Some(inner), Some(sz)) = (out.get(&tname), l.size.get(&tname)) {
                    (inner.clone(), sz / 4)
                } else {
                    ok = false;
                    break;
                };
                let base = if is_union { 0 } else { at };
                for (n, i) in entries {
                    if !flat.iter().any(|(m, _)| *m == n) {
                        flat.push((n, base + i));
                    }
                }
                at = if is_union { at.max(size) } else { at + size };
            }
            if ok && l.size.get(&name) == Some(&(at * 4)) {
                out.insert(name, flat);
            }
        }
        if out.len() == before {
            break;
        }
    }
    out
}

fn add_derives(attrs: &mut Vec<syn::Attribute>, d: Option<(bool, bool, bool)>) {
    // bindgen's own derive lists depended on the helper types removed above.
    attrs.retain(|a| !a.path().is_ident("derive"));
    let Some((debug, from_bytes, into_bytes)) = d else {
        return;
    };
    let mut list = vec![quote!(Clone), quote!(Copy)];
    if debug {
        list.push(quote!(Debug));
    }
    list.extend([quote!(zerocopy::Immutable), quote!(zerocopy::KnownLayout)]);
    if from_bytes {
        list.push(quote!(zerocopy::FromBytes));
    }
    if into_bytes {
        list.push(quote!(zerocopy::IntoBytes));
    }
    attrs.push(syn::parse_quote!(#[derive(#(#list),*)]));
}

fn push_asserts(items: &mut Vec<syn::Item>, name: &str, l: &Layouts, header: &str) -> Result<()> {
    let (Some(size), Some(align)) = (l.size.get(name), l.align.get(name)) else {
        bail!("{header}: clang gave no layout for {name}");
    };
    let id = format_ident!("{name}");
    items.push(syn::parse_quote!(
        const _: () = assert!(core::mem::size_of::<#id>() == #size);
    ));
    items.push(syn::parse_quote!(
        const _: () = assert!(core::mem::align_of::<#id>() == #align);
    ));
    Ok(())
}
