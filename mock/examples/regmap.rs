//! Print a profile's register map statistics: `cargo run -p am-mock --example regmap navi31`.

fn main() {
    let name = std::env::args().nth(1).unwrap_or_else(|| "navi31".into());
    let gpu = match am_mock::MockGpu::new(&name) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let map = gpu.register_map();
    println!(
        "{name}: {} register dwords, {} aliased names",
        map.len(),
        map.aliases().len()
    );
    let mut cross = std::collections::BTreeMap::new();
    for a in map.aliases() {
        let i = map.info(a.reg);
        let first = i.name.split('_').next().unwrap_or("");
        let other = a.name.split('_').next().unwrap_or("");
        let key = (
            i.table.name(),
            i.instance,
            first,
            a.table.name(),
            a.instance,
            other,
        );
        *cross.entry(key).or_insert(0) += 1;
    }
    for ((t, i, a, t2, i2, b), n) in cross {
        println!("  {t}[{i}] {a}* also named {t2}[{i2}] {b}*: {n}");
    }
}
