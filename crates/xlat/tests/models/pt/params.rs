//! Page-table parameters: invalid values name their key; configs read from TOML build tables.

use serde::Deserialize;
use xlat::addr::{Asid, PageSize, Pfn, Vpn};
use xlat::pt::{BitsPerLevel, HashFn, Kind, LineAccounting, PageTable, PageTableConfig, Pte};

fn err(cfg: PageTableConfig) -> String {
    match PageTable::new(&cfg, PageSize::SIZE_4K) {
        Ok(t) => panic!("{cfg:?} was accepted: {t:?}"),
        Err(e) => {
            let shown = e.to_string();
            assert!(shown.starts_with(&e.key), "{shown}");
            assert!(!e.message.is_empty());
            e.key
        }
    }
}

fn kind(kind: Kind) -> PageTableConfig {
    PageTableConfig { kind, ..Default::default() }
}

const ALL: [Kind; 4] = [Kind::Radix, Kind::Linear, Kind::Hashed, Kind::Clustered];

#[test]
fn zero_buckets() {
    for k in [Kind::Hashed, Kind::Clustered] {
        let cfg = PageTableConfig { buckets: 0, ..kind(k) };
        assert_eq!(err(cfg), "page_table.buckets");
    }
}

#[test]
fn subblock_factor_not_a_power_of_two() {
    for s in [0, 3, 12, 1 << 20] {
        let cfg = PageTableConfig { subblock_factor: s, ..kind(Kind::Clustered) };
        assert_eq!(err(cfg), "page_table.subblock_factor");
    }
}

#[test]
fn bits_per_level_inconsistent_with_levels() {
    let cfg = PageTableConfig {
        levels: Some(4),
        bits_per_level: Some(BitsPerLevel::PerLevel(vec![9, 9, 18])),
        ..kind(Kind::Radix)
    };
    assert_eq!(err(cfg), "page_table.bits_per_level");
    let cfg =
        PageTableConfig { bits_per_level: Some(BitsPerLevel::PerLevel(vec![9, 0, 9, 9, 9])), ..kind(Kind::Radix) };
    assert_eq!(err(cfg), "page_table.bits_per_level");
    // A list that cannot cover va_bits.
    let cfg = PageTableConfig { bits_per_level: Some(BitsPerLevel::PerLevel(vec![9, 9, 9])), ..kind(Kind::Radix) };
    assert_eq!(err(cfg), "page_table.bits_per_level");
    // Linear tables have page-sized nodes.
    let cfg = PageTableConfig { bits_per_level: Some(BitsPerLevel::Uniform(10)), ..kind(Kind::Linear) };
    assert_eq!(err(cfg), "page_table.bits_per_level");
}

#[test]
fn levels_too_few_for_va_bits() {
    // 3 x 9 bits < 48 - 12.
    let cfg = PageTableConfig { levels: Some(3), ..kind(Kind::Radix) };
    assert_eq!(err(cfg), "page_table.levels");
    let cfg = PageTableConfig { levels: Some(4), va_bits: 57, ..kind(Kind::Radix) };
    assert_eq!(err(cfg), "page_table.levels");
    let cfg = PageTableConfig { levels: Some(0), ..kind(Kind::Radix) };
    assert_eq!(err(cfg), "page_table.levels");
    // Linear: more levels than needed, or a wired root too large to simulate.
    for levels in [0, 5, 1] {
        let cfg = PageTableConfig { levels: Some(levels), ..kind(Kind::Linear) };
        assert_eq!(err(cfg), "page_table.levels", "linear levels {levels}");
    }
}

#[test]
fn line_bytes_not_a_power_of_two() {
    for k in ALL {
        for line in [0, 48, 4] {
            let cfg = PageTableConfig { line_bytes: line, ..kind(k) };
            assert_eq!(err(cfg), "page_table.line_bytes", "{k:?} {line}");
        }
    }
}

#[test]
fn other_shared_keys() {
    for k in ALL {
        let cfg = PageTableConfig { va_bits: 65, ..kind(k) };
        assert_eq!(err(cfg), "page_table.va_bits");
        let cfg = PageTableConfig { va_bits: 12, ..kind(k) };
        assert_eq!(err(cfg), "page_table.va_bits");
        let cfg = PageTableConfig { pte_bytes: 6, ..kind(k) };
        assert_eq!(err(cfg), "page_table.pte_bytes");
    }
    let cfg = PageTableConfig { pwc: vec![4, 32, 32, 32], ..kind(Kind::Radix) };
    assert_eq!(err(cfg), "page_table.pwc");
}

#[test]
fn valid_edge_values_are_accepted() {
    for buckets in [1, 3, 4095, 1 << 20] {
        for k in [Kind::Hashed, Kind::Clustered] {
            PageTable::new(&PageTableConfig { buckets, ..kind(k) }, PageSize::SIZE_4K).unwrap();
        }
    }
    for s in [1, 2, 64, 512] {
        let cfg = PageTableConfig { subblock_factor: s, ..kind(Kind::Clustered) };
        PageTable::new(&cfg, PageSize::SIZE_4K).unwrap();
    }
    // 64-bit radix with 4 KB pages: 52 VPN bits, six 9-bit levels by default.
    let cfg = PageTableConfig { va_bits: 64, ..kind(Kind::Radix) };
    let PageTable::Radix(t) = PageTable::new(&cfg, PageSize::SIZE_4K).unwrap() else { panic!() };
    assert_eq!(t.levels(), 6);
}

#[derive(Deserialize)]
struct File {
    page_table: PageTableConfig,
}

#[test]
fn toml_configs() {
    let f: File = toml::from_str(
        r#"
        [page_table]
        kind = "radix"
        va_bits = 57
        bits_per_level = [9, 9, 9, 9, 9]
        pwc = [2, 4, 32, 32]
        accounting = "layout"
        "#,
    )
    .unwrap();
    assert_eq!(f.page_table.accounting, LineAccounting::Layout);
    let mut pt = PageTable::new(&f.page_table, PageSize::SIZE_4K).unwrap();
    let pte = Pte { pfn: Pfn(1), size: PageSize::SIZE_4K, valid: 0 };
    pt.map(Asid(0), Vpn(1 << 40), pte);
    assert_eq!(pt.get(Asid(0), Vpn(1 << 40)), Some(pte));

    let f: File =
        toml::from_str("[page_table]\nkind = \"clustered\"\nbuckets = 1000\nhash = \"mult\"\nsubblock_factor = 8\n")
            .unwrap();
    assert_eq!(f.page_table.hash, HashFn::Mult);
    let pt = PageTable::new(&f.page_table, PageSize::SIZE_4K).unwrap();
    assert_eq!(pt.kind(), Kind::Clustered);

    let f: File = toml::from_str("[page_table]\nbits_per_level = 10\nva_bits = 32\npte_bytes = 4\n").unwrap();
    let PageTable::Radix(t) = PageTable::new(&f.page_table, PageSize::SIZE_4K).unwrap() else { panic!() };
    assert_eq!(t.bits_per_level(), vec![10, 10]);

    assert!(toml::from_str::<File>("[page_table]\nbucket = 4\n").is_err());
}
