//! Printers: a side-by-side text table, JSON and CSV, all read from the engine's stats.

use crate::engine::{DesignFailure, RunSummary, System};
use crate::stats::SystemStats;
use crate::trace::Kind;
use serde_json::{json, Value};
use std::fmt::Write as _;

/// What a report describes besides the systems.
#[derive(Clone, Debug)]
pub struct ReportInput<'a> {
    /// Trace path as given.
    pub trace_path: &'a str,
    /// Format read.
    pub format: &'a str,
    /// Run summary.
    pub summary: &'a RunSummary,
    /// Wall-clock seconds of the simulation.
    pub seconds: f64,
}

/// One line saying why and where a design stopped: the trace, the reference and the record
/// numbers (1-based), and the simulation error (which names the design and the config key).
pub fn failure_message(input: &ReportInput, f: &DesignFailure) -> String {
    format!("{}: reference {} (record {}): {}", input.trace_path, f.reference, f.record, f.error)
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// The JSON document of a run (schema in `docs/output.md`).
pub fn json(input: &ReportInput, systems: &[System]) -> Value {
    let t = &input.summary.trace;
    let by_kind: serde_json::Map<String, Value> =
        Kind::ALL.iter().map(|k| (k.name().to_string(), json!(t.by_kind[*k as usize]))).collect();
    let configs: Vec<Value> = systems
        .iter()
        .map(|s| match s.failure() {
            None => design_json(s),
            Some(f) => json!({
                "name": s.config().name,
                "status": "failed",
                "error": failure_message(input, f),
                "failed_at": { "reference": f.reference, "record": f.record },
            }),
        })
        .collect();
    let failed = systems.iter().filter(|s| s.failure().is_some()).count();
    json!({
        "xlat_version": env!("CARGO_PKG_VERSION"),
        "complete": failed == 0,
        "failed_designs": failed,
        "trace": {
            "path": input.trace_path,
            "format": input.format,
            "references": t.references,
            "by_kind": by_kind,
            "lookups": t.lookups,
            "lookup_page_size": t.lookup_page_size,
            "events": t.events,
            "clipped_accesses": t.clipped_accesses,
            "skipped": input.summary.reader.skipped,
            "stopped_at_max_refs": input.summary.truncated_by_limit,
        },
        "seconds": input.seconds,
        "configs": configs,
    })
}

/// The JSON of one design that ran (one element of `configs`, docs/output.md).
pub fn design_json(s: &System) -> Value {
    let st = s.stats();
    let cfg = s.config();
    let tlb: Vec<Value> = s
        .structures()
        .iter()
        .zip(&st.tlb)
        .map(|(x, c)| {
            let g = x.tlb.geometry();
            json!({
                "name": x.name,
                "level": x.level,
                "serves": x.serves.map(|v| v.name()).unwrap_or("page-table"),
                "entries": g.entries,
                "ways": g.ways,
                "sets": x.tlb.sets(),
                "policy": g.policy.name(),
                "format": x.format.name(),
                "accesses": c.accesses,
                "hits": c.hits,
                "misses": c.misses,
                "miss_ratio": ratio(c.misses, c.accesses),
                "evictions": c.evictions,
                "invalidations": c.invalidations,
                "block_misses": c.misses - c.subblock_misses,
                "subblock_misses": c.subblock_misses,
            })
        })
        .collect();
    let (peak, end) = (st.page_table.peak, st.page_table.end);
    let w = st.walks;
    let mut doc = json!({
        "name": cfg.name,
        "status": "ok",
        "page_size": s.page_size().bytes(),
        "asid": match cfg.asid { crate::config::AsidMode::Tagged => "tagged", crate::config::AsidMode::Flush => "flush" },
        "lookups": st.lookups,
        "ifetch_lookups": st.ifetch_lookups,
        "data_lookups": st.lookups - st.ifetch_lookups,
        "tlb": tlb,
        "page_faults": st.page_faults,
        "resident_pages": st.resident_pages,
        "walks": {
            "count": w.count,
            "memory_refs": w.memory_refs,
            "cache_lines": w.cache_lines,
            "nested_misses": w.nested_misses,
            "pt_fills": w.pt_fills,
            "pwc_hits": w.pwc_hits,
            "cache_hits": w.cache_hits,
            "cache_misses": w.cache_misses,
            "block_walks": w.block_walks,
            "fault_lines": w.fault_lines,
            "superpage_walks": w.superpage_walks,
            "superpage_lines": w.superpage_lines,
            "by_depth": w.by_depth,
            "refs_per_walk": ratio(w.memory_refs, w.count),
            "lines_per_walk": ratio(w.cache_lines, w.count),
        },
        "page_table": {
            "kind": cfg.page_table.kind.name(),
            "superpage_store": cfg.page_table.store().name(),
            "bytes": peak.table_bytes,
            "bytes_end": end.table_bytes,
            "bucket_bytes": peak.bucket_bytes,
            "bucket_bytes_end": end.bucket_bytes,
            "objects": peak.objects,
            "objects_end": end.objects,
        },
        "cycles": {
            "total": st.cycles.total(),
            "per_lookup": ratio(st.cycles.total(), st.lookups),
            "tlb": st.cycles.tlb,
            "walk_memory": st.cycles.walk_memory,
            "refill_overhead": st.cycles.refill_overhead,
            "page_fault": st.cycles.page_fault,
            "hit_latency": crate::cost::hit_latency_cycles(&st, s.design().cost()),
        },
        "events": st.events,
        "kernel": st.kernel,
        "os": st.os,
    });
    if cfg.page_table.kind == crate::pt::Kind::VhptLong {
        doc["page_table"]["os_kind"] = json!(s.page_table().kind().name());
    }
    if let Some(v) = st.vhpt {
        doc["vhpt"] = json!({
            "format": if cfg.page_table.kind == crate::pt::Kind::VhptLong { "long" } else { "short" },
            "walker": cfg.page_table.walker.name(),
            "entries": s.vhpt_bytes().map(|b| b / crate::pt::vhpt::ENTRY_BYTES),
            "bytes": s.vhpt_bytes(),
            "lookups": v.lookups,
            "hits": v.hits,
            "misses": v.misses,
            "collisions": v.collisions,
            "invalidations": v.invalidations,
            "purges": v.purges,
        });
    }
    if let (Some(r), Some(i)) = (st.rids, &cfg.itanium) {
        doc["rids"] = json!({
            "bits": i.rid_bits,
            "alloc": i.rid_alloc.name(),
            "share_text": i.share_text,
            "shared_region": i.shared_region,
            "allocated": r.allocated,
            "purges": r.purges,
        });
        let k = st.keys.unwrap_or_default();
        doc["keys"] = json!({
            "enabled": i.protection_keys,
            "pkrs": i.pkrs,
            "policy": i.pkr_policy.name(),
            "checks": k.checks,
            "misses": k.misses,
            "reloads": k.reloads,
        });
    }
    if let Some(m) = st.mach {
        // Beside the kernel's events and cycles: Mach's own references and handlers (its
        // level-1 lookups are the kernel's `tlb_lookups`: Mach designs have no footprint).
        let mach = json!({
            "personality": "mach3",
            "references": m.references,
            "ipc": m.ipc,
            "syscalls": m.syscalls,
            "tlb_lookups": m.tlb_lookups,
            "kernel_misses": m.kernel_misses(),
            "miss_cycles": m.miss_cycles,
            "user_miss_cycles": m.user_cycles,
            "stlb_overhead_cycles": m.stlb_overhead_cycles,
            "pte_writes": m.pte_writes,
        });
        if let (Some(k), Some(fields)) = (doc["kernel"].as_object_mut(), mach.as_object()) {
            k.extend(fields.iter().map(|(key, v)| (key.clone(), v.clone())));
        }
        doc["misses_by_type"] = json!({
            "l1u": m.l1u,
            "l1k": m.l1k,
            "l2": m.l2,
            "l3": m.l3,
            "invalid": m.invalid,
        });
        doc["nested_misses"] = json!(m.nested);
        doc["misses_by_depth"] = json!(m.by_depth);
        if let Some(p) = &cfg.ptlb {
            doc["ptlb"] = json!({
                "entries": p.entries,
                "prefetches": m.ptlb_prefetches,
                "present": m.ptlb_present,
                "useful": m.ptlb_useful,
                "recorded": m.ptlb_recorded,
                "cycles": m.ptlb_cycles,
            });
        }
    }
    if let (Some(counts), Some(c)) = (st.stlb, &cfg.stlb) {
        let (lookups, hits) = (counts.lookups, counts.hits);
        doc["stlb"] = json!({
            "entries": c.entries,
            "ways": c.ways,
            "lookups": lookups,
            "hits": hits,
            "hit_ratio": ratio(hits, lookups),
        });
    }
    if let Some(l) = st.layout {
        doc["layout"] = json!({
            "kind": cfg.layout.kind.name(),
            "mappings": l.mappings,
            "implicit": l.implicit,
            "shared_objects": l.shared_objects,
        });
    }
    if let (Some(h), Some(t)) = (s.caches(), st.time) {
        let caches: Vec<Value> = h
            .levels()
            .iter()
            .zip(&st.caches)
            .map(|(l, c)| {
                json!({
                    "name": l.name,
                    "level": l.level,
                    "serves": l.serves.name(),
                    "size": l.size,
                    "line": l.line,
                    "ways": l.ways,
                    "sets": l.sets,
                    "policy": l.policy.name(),
                    "write": l.write.name(),
                    "index": l.index.name(),
                    "walker": l.walker,
                    "latency": l.latency,
                    "accesses": c.accesses,
                    "hits": c.hits,
                    "misses": c.misses,
                    "read_misses": c.read_misses,
                    "write_misses": c.write_misses,
                    "miss_ratio": ratio(c.misses, c.accesses),
                    "writebacks": c.writebacks,
                })
            })
            .collect();
        doc["caches"] = json!(caches);
        doc["memory"] = json!({ "latency": h.memory_latency(), "reads": st.memory.reads, "writes": st.memory.writes });
        if let (Some(m), Some(counts)) = (h.mtlb(), st.mtlb) {
            let (g, c, (referenced, dirty)) =
                (m.geometry(), counts.counts, (counts.referenced_pages, counts.dirty_pages));
            doc["mtlb"] = json!({
                "entries": g.entries,
                "ways": g.ways,
                "policy": g.policy.name(),
                "requests": c.requests,
                "lookups": c.lookups,
                "hits": c.hits,
                "misses": c.misses,
                "unmapped": c.unmapped,
                "referenced_pages": referenced,
                "dirty_pages": dirty,
            });
        }
        doc["time"] = json!({
            "cycles": t.cycles,
            "instructions": t.instructions,
            "cpi": ratio(t.cycles, t.instructions),
            "breakdown": {
                "base": t.base,
                "icache": t.icache,
                "dcache": t.dcache,
                "translation": t.translation,
                "faults": t.faults,
                "kernel": t.kernel,
            },
            "translation_share": t.translation_share(),
        });
        if st.shadow.is_some() {
            doc["time"]["breakdown"]["remap"] = json!(t.remap);
        }
        if let Some(mhz) = s.design().cost().clock_mhz {
            doc["time"]["clock_mhz"] = json!(mhz);
            doc["time"]["seconds"] = json!(t.seconds(mhz));
        }
    }
    if let Some(sd) = st.shootdowns {
        doc["shootdowns"] = shootdowns_json(&sd);
        if let (Some(t), Some(mhz)) = (st.time, s.design().cost().clock_mhz) {
            // Per second of the cores' time together (the trace runs one thread at a time).
            let secs = t.seconds(mhz);
            doc["shootdowns"]["ipis_per_second"] = json!(if secs > 0.0 { sd.ipis as f64 / secs } else { 0.0 });
        }
        doc["cycles"]["shootdown"] = json!(st.cycles.shootdown);
        if let (Some(t), Some(_)) = (st.time, doc.get("time")) {
            doc["time"]["breakdown"]["shootdown"] = json!(t.shootdown);
        }
        let names: Vec<&str> = s.structures().iter().map(|x| x.name.as_str()).collect();
        let levels: Vec<&str> =
            s.caches().map(|h| h.levels().iter().map(|l| l.name.as_str()).collect()).unwrap_or_default();
        doc["cores"] = st
            .cores
            .iter()
            .enumerate()
            .map(|(i, c)| {
                json!({
                    "core": i,
                    "lookups": c.lookups,
                    "ifetch_lookups": c.ifetch_lookups,
                    "switches": c.switches,
                    "space_switches": c.space_switches,
                    "asid_flushes": c.asid_flushes,
                    "tlb": c.tlb.iter().zip(&names).map(|(t, n)| json!({
                        "name": n,
                        "accesses": t.accesses,
                        "hits": t.hits,
                        "misses": t.misses,
                        "evictions": t.evictions,
                        "invalidations": t.invalidations,
                    })).collect::<Vec<_>>(),
                    "caches": c.caches.iter().zip(&levels).map(|(x, n)| json!({
                        "name": n,
                        "accesses": x.accesses,
                        "hits": x.hits,
                        "misses": x.misses,
                        "writebacks": x.writebacks,
                    })).collect::<Vec<_>>(),
                    "shootdowns": shootdowns_json(&c.shootdowns),
                })
            })
            .collect();
    }
    if let Some(sh) = st.shadow {
        doc["shadow"] = json!({
            "policy": cfg.os.shadow_superpages.name(),
            "method": match cfg.shadow.method {
                crate::os::shadow::ShadowMethod::Remap => "remap",
                crate::os::shadow::ShadowMethod::Copy => "copy",
            },
            "superpages": sh.superpages,
            "live_superpages": sh.live_superpages,
            "torn_down": sh.torn_down,
            "failures": sh.failures,
            "pages_remapped": sh.pages_remapped,
            "pages_allocated": sh.pages_allocated,
            "pages_copied": sh.pages_copied,
            "lines_flushed": sh.lines_flushed,
            "dirty_lines": sh.dirty_lines,
            "flush_cycles": sh.flush_cycles,
            "create_flush_cycles": sh.create_flush_cycles,
            "copy_cycles": sh.copy_cycles,
            "page_cycles": sh.page_cycles,
            "cycles": sh.cycles(),
        });
    }
    doc
}

/// The JSON of shootdown counters (docs/output.md).
fn shootdowns_json(sd: &crate::stats::ShootdownStats) -> Value {
    json!({
        "initiated": sd.initiated,
        "ipis": sd.ipis,
        "necessary_ipis": sd.necessary_ipis,
        "full_flushes": sd.full_flushes,
        "pages": sd.pages,
        "entries_invalidated": sd.entries_invalidated,
        "initiator_cycles": sd.initiator_cycles,
        "target_cycles": sd.target_cycles,
    })
}

/// Per-core rows (`xlat run --per-core`) of the designs with several cores: each core's
/// lookups, its level-1 and last-level TLB misses, switches, ASID flushes and shootdowns;
/// empty if no design has several cores.
pub fn per_core_table(systems: &[System]) -> String {
    let mut out = String::new();
    for s in systems.iter().filter(|s| s.failure().is_none()) {
        let st = s.stats();
        if st.cores.is_empty() {
            continue;
        }
        let names: Vec<&str> = s.structures().iter().map(|x| x.name.as_str()).collect();
        let _ = writeln!(out, "{} (per core):", s.config().name);
        let mut head = format!("{:>5} {:>12}", "core", "lookups");
        for n in &names {
            head += &format!(" {:>12}", format!("{n} misses"));
        }
        head += &format!(
            " {:>9} {:>9} {:>8} {:>10} {:>8} {:>9}",
            "switches", "spaces", "asid fl", "shootdowns", "IPIs", "needed"
        );
        let _ = writeln!(out, "{head}");
        for (i, c) in st.cores.iter().enumerate() {
            let mut row = format!("{i:>5} {:>12}", c.lookups);
            for t in &c.tlb {
                row += &format!(" {:>12}", t.misses);
            }
            let sd = &c.shootdowns;
            row += &format!(
                " {:>9} {:>9} {:>8} {:>10} {:>8} {:>9}",
                c.switches, c.space_switches, c.asid_flushes, sd.initiated, sd.ipis, sd.necessary_ipis
            );
            let _ = writeln!(out, "{row}");
        }
    }
    out
}

/// A trace's name and format as the table says them: `T.xtr (xtr)`, and a name that already ends
/// in a note in parentheses (`data/demo.xtr (bundled)`) gets the format in that note
/// (`data/demo.xtr (bundled, xtr)`).
fn trace_name(path: &str, format: &str) -> String {
    match path.strip_suffix(')').and_then(|p| p.rsplit_once(" (")) {
        Some((name, note)) if !note.contains(['(', ')']) => format!("{name} ({note}, {format})"),
        _ => format!("{path} ({format})"),
    }
}

/// A side-by-side text table, one column per system, in lines of at most `width` characters:
/// when the columns do not fit side by side they are printed in blocks of as many as fit, each
/// block with the row labels and without the rows that are empty in all of its columns. (A
/// single column wider than `width`, or a failed design's error line, may still be longer.)
pub fn table(input: &ReportInput, systems: &[System], width: usize) -> String {
    let t = &input.summary.trace;
    let mut out = String::new();
    let name = trace_name(input.trace_path, input.format);
    let limit = if input.summary.truncated_by_limit { ", stopped at --max-refs" } else { "" };
    let kinds =
        format!("{} ifetch, {} load, {} store, {} modify", t.by_kind[0], t.by_kind[1], t.by_kind[2], t.by_kind[3]);
    let line = format!("trace {name}: {} references ({kinds}), {} events{limit}", t.references, t.events);
    if line.chars().count() <= width {
        let _ = writeln!(out, "{line}");
    } else {
        let _ = writeln!(out, "trace {name}:\n  {} references ({kinds})\n  {} events{limit}", t.references, t.events);
    }
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    // A failed design's counters stop where it failed: its column shows none of them.
    rows.push(("config".to_string(), systems.iter().map(|s| s.config().name.clone()).collect()));
    if systems.iter().any(|s| s.failure().is_some()) {
        rows.push((
            "status".to_string(),
            systems.iter().map(|s| if s.failure().is_some() { "FAILED" } else { "ok" }.to_string()).collect(),
        ));
    }
    // Every counter comes from the designs' statistics.
    let stats: Vec<SystemStats> = systems.iter().map(System::stats).collect();
    let mut row = |label: &str, f: &dyn Fn(&System, &SystemStats) -> String| {
        let cells = systems
            .iter()
            .zip(&stats)
            .map(|(s, st)| match s.failure() {
                Some(_) if !label.is_empty() => "-".to_string(),
                _ => f(s, st),
            })
            .collect();
        rows.push((label.to_string(), cells));
    };
    row("page size", &|s, _| s.page_size().to_string());
    row("lookups", &|_, st| st.lookups.to_string());
    let max_structs = systems.iter().map(|s| s.structures().len()).max().unwrap_or(0);
    for i in 0..max_structs {
        row("", &|_, _| String::new());
        row(&format!("tlb #{}", i + 1), &|s, _| {
            s.structures()
                .get(i)
                .map(|x| {
                    let g = x.tlb.geometry();
                    let format = match x.format {
                        crate::config::TlbFormat::Single => String::new(),
                        f => format!(" {}", f.name()),
                    };
                    format!("{} {} {}{format}", x.name, geometry_text(g.entries, g.ways), g.policy.name())
                })
                .unwrap_or_default()
        });
        row("  accesses", &|_, st| st.tlb.get(i).map(|c| c.accesses.to_string()).unwrap_or_default());
        row("  misses", &|_, st| st.tlb.get(i).map(|c| c.misses.to_string()).unwrap_or_default());
        row("  miss ratio", &|_, st| {
            st.tlb.get(i).map(|c| format!("{:.4}%", 100.0 * ratio(c.misses, c.accesses))).unwrap_or_default()
        });
        if stats.iter().any(|st| st.tlb.get(i).is_some_and(|c| c.subblock_misses > 0)) {
            row("  subblock misses", &|_, st| st.tlb.get(i).map(|c| c.subblock_misses.to_string()).unwrap_or_default());
        }
    }
    row("", &|_, _| String::new());
    row("page faults", &|_, st| st.page_faults.to_string());
    if stats.iter().any(|st| st.os.promotions + st.os.reservations > 0) {
        row("  promotions", &|_, st| st.os.promotions.to_string());
        row("  demotions", &|_, st| st.os.demotions.to_string());
        row("  reservations failed", &|_, st| {
            let o = st.os;
            format!("{}/{}", o.reservation_failures, o.reservations + o.reservation_failures)
        });
    }
    if stats.iter().any(|st| st.kernel.cycles > 0) {
        row("kernel cycles", &|_, st| st.kernel.cycles.to_string());
    }
    row("walks", &|_, st| st.walks.count.to_string());
    row("  memory refs/walk", &|_, st| {
        let w = st.walks;
        format!("{:.2}", ratio(w.memory_refs, w.count))
    });
    row("  cache lines/walk", &|_, st| {
        let w = st.walks;
        format!("{:.2}", ratio(w.cache_lines, w.count))
    });
    row("  nested misses", &|_, st| st.walks.nested_misses.to_string());
    row("page table", &|s, _| s.config().page_table.kind.name().to_string());
    row("  bytes at peak", &|_, st| st.page_table.peak.table_bytes.to_string());
    row("  bytes at end", &|_, st| st.page_table.end.table_bytes.to_string());
    if stats.iter().any(|st| st.vhpt.is_some()) {
        row("vhpt lookups", &|_, st| st.vhpt.map(|v| v.lookups.to_string()).unwrap_or_default());
        row("  misses", &|_, st| st.vhpt.map(|v| v.misses.to_string()).unwrap_or_default());
        row("  collisions", &|_, st| st.vhpt.map(|v| v.collisions.to_string()).unwrap_or_default());
    }
    if stats.iter().any(|st| st.rids.is_some()) {
        row("rids allocated", &|_, st| st.rids.map(|r| r.allocated.to_string()).unwrap_or_default());
        row("  purges", &|_, st| st.rids.map(|r| r.purges.to_string()).unwrap_or_default());
    }
    if stats.iter().any(|st| st.keys.is_some()) {
        row("key checks", &|_, st| st.keys.map(|k| k.checks.to_string()).unwrap_or_default());
        row("  key misses", &|_, st| st.keys.map(|k| k.misses.to_string()).unwrap_or_default());
    }
    if stats.iter().any(|st| st.mach.is_some()) {
        let m = |st: &SystemStats, f: &dyn Fn(&crate::os::mach3::Mach3Stats) -> u64| {
            st.mach.map(|m| f(&m).to_string()).unwrap_or_default()
        };
        row("kernel references", &|_, st| m(st, &|m| m.references));
        row("  ipc, syscalls", &|_, st| st.mach.map(|m| format!("{}, {}", m.ipc, m.syscalls)).unwrap_or_default());
        row("misses l1u", &|_, st| m(st, &|m| m.l1u));
        row("  l1k, l2, l3", &|_, st| st.mach.map(|m| format!("{}, {}, {}", m.l1k, m.l2, m.l3)).unwrap_or_default());
        row("  invalid", &|_, st| m(st, &|m| m.invalid));
        row("  kernel nested", &|_, st| m(st, &|m| m.nested));
        if systems.iter().any(|s| s.config().ptlb.is_some()) {
            row("ptlb prefetches", &|_, st| m(st, &|m| m.ptlb_prefetches));
            row("  useful", &|_, st| m(st, &|m| m.ptlb_useful));
        }
    }
    if stats.iter().any(|st| st.stlb.is_some()) {
        row("stlb lookups", &|_, st| st.stlb.map(|c| c.lookups.to_string()).unwrap_or_default());
        row("  hits", &|_, st| st.stlb.map(|c| c.hits.to_string()).unwrap_or_default());
    }
    row("translation cycles", &|_, st| st.cycles.total().to_string());
    row("  per lookup", &|_, st| format!("{:.3}", ratio(st.cycles.total(), st.lookups)));
    // First-level hits cost nothing unless a design charges hit latency: its column says so.
    let hit_latency: Vec<u64> =
        systems.iter().zip(&stats).map(|(s, st)| crate::cost::hit_latency_cycles(st, s.design().cost())).collect();
    if hit_latency.iter().any(|&h| h > 0) {
        row("  of which L1 hit latency", &|s, st| {
            let h = crate::cost::hit_latency_cycles(st, s.design().cost());
            if h > 0 {
                h.to_string()
            } else {
                String::new()
            }
        });
    }
    let max_caches = systems.iter().filter_map(|s| s.caches()).map(|h| h.levels().len()).max().unwrap_or(0);
    for i in 0..max_caches {
        let level = |s: &System| s.caches().and_then(|h| h.levels().get(i).cloned());
        let counts = move |st: &SystemStats| st.caches.get(i).copied();
        row("", &|_, _| String::new());
        row(&format!("cache #{}", i + 1), &|s, _| {
            level(s)
                .map(|l| {
                    let write = if l.write == crate::cache::WritePolicy::Back { "" } else { " write-through" };
                    let index = match l.index {
                        crate::cache::Indexing::Physical => "",
                        crate::cache::Indexing::Virtual => " VIVT",
                        crate::cache::Indexing::Vipt => " VIPT",
                    };
                    format!(
                        "{} {} {} {}, {} B lines{write}{index}",
                        l.name,
                        bytes_text(l.size),
                        if l.sets == 1 {
                            "full".to_string()
                        } else if l.ways == 1 {
                            "direct".to_string()
                        } else {
                            format!("{}-way", l.ways)
                        },
                        l.policy.name(),
                        l.line
                    )
                })
                .unwrap_or_default()
        });
        row("  accesses", &|_, st| counts(st).map(|c| c.accesses.to_string()).unwrap_or_default());
        row("  misses", &|_, st| counts(st).map(|c| c.misses.to_string()).unwrap_or_default());
        row("  miss ratio", &|_, st| {
            counts(st).map(|c| format!("{:.4}%", 100.0 * ratio(c.misses, c.accesses))).unwrap_or_default()
        });
        row("  writebacks", &|_, st| counts(st).map(|c| c.writebacks.to_string()).unwrap_or_default());
    }
    if systems.iter().any(|s| s.caches().is_some()) {
        row("", &|_, _| String::new());
        row("memory reads/writes", &|s, st| {
            s.caches()
                .map(|_| {
                    let m = st.memory;
                    format!("{}/{}", m.reads, m.writes)
                })
                .unwrap_or_default()
        });
        row("total time (cycles)", &|_, st| st.time.map(|t| t.cycles.to_string()).unwrap_or_default());
        if systems.iter().any(|s| s.design().cost().clock_mhz.is_some()) {
            row("  seconds", &|s, st| {
                st.time
                    .zip(s.design().cost().clock_mhz)
                    .map(|(t, mhz)| format!("{:.6}", t.seconds(mhz)))
                    .unwrap_or_default()
            });
        }
        row("  instructions", &|_, st| st.time.map(|t| t.instructions.to_string()).unwrap_or_default());
        row("  base", &|_, st| st.time.map(|t| t.base.to_string()).unwrap_or_default());
        row("  icache stalls", &|_, st| st.time.map(|t| t.icache.to_string()).unwrap_or_default());
        row("  dcache stalls", &|_, st| st.time.map(|t| t.dcache.to_string()).unwrap_or_default());
        row("  translation", &|_, st| st.time.map(|t| t.translation.to_string()).unwrap_or_default());
        row("  page faults", &|_, st| st.time.map(|t| t.faults.to_string()).unwrap_or_default());
        if stats.iter().any(|st| st.time.is_some_and(|t| t.kernel > 0)) {
            row("  kernel", &|_, st| st.time.map(|t| t.kernel.to_string()).unwrap_or_default());
        }
        if stats.iter().any(|st| st.time.is_some_and(|t| t.shootdown > 0)) {
            row("  shootdowns", &|_, st| st.time.map(|t| t.shootdown.to_string()).unwrap_or_default());
        }
        row("  translation share", &|_, st| {
            st.time.map(|t| format!("{:.2}%", 100.0 * t.translation_share())).unwrap_or_default()
        });
    }
    let label_w = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let col_w: Vec<usize> =
        (0..systems.len()).map(|c| rows.iter().map(|r| r.1[c].chars().count()).max().unwrap_or(0).max(8)).collect();
    for (b, block) in column_blocks(label_w, &col_w, width).into_iter().enumerate() {
        if b > 0 {
            out.push('\n');
        }
        let mut blank = false;
        for (i, (label, cells)) in rows.iter().enumerate() {
            let cells = &cells[block.clone()];
            // Rows of parts no design of this block has (a third TLB, caches) are left out.
            if i > 0 && !label.is_empty() && cells.iter().all(String::is_empty) {
                continue;
            }
            if label.is_empty() && cells.iter().all(String::is_empty) {
                if blank {
                    continue;
                }
                blank = true;
            } else {
                blank = false;
            }
            let mut line = format!("{label:<label_w$}");
            for (cell, w) in cells.iter().zip(&col_w[block.clone()]) {
                let _ = write!(line, "  {cell:>w$}");
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    for s in systems {
        if let Some(f) = s.failure() {
            let _ = writeln!(out, "FAILED {}: {}", s.config().name, failure_message(input, f));
        }
    }
    out
}

/// The columns of a table in blocks that fit `width` characters beside the labels (two spaces
/// before each column); every block holds at least one column.
fn column_blocks(label_w: usize, col_w: &[usize], width: usize) -> Vec<std::ops::Range<usize>> {
    let mut blocks = Vec::new();
    let (mut start, mut used) = (0, label_w);
    for (c, w) in col_w.iter().enumerate() {
        if c > start && used + 2 + w > width {
            blocks.push(start..c);
            (start, used) = (c, label_w);
        }
        used += 2 + w;
    }
    blocks.push(start..col_w.len());
    blocks
}

/// A size for people: `16 KB`, `1.5 MB`, `100 B`.
fn bytes_text(b: u64) -> String {
    let (v, unit) = if b >= 1 << 20 && b % (1 << 18) == 0 {
        (b as f64 / (1 << 20) as f64, "MB")
    } else if b >= 1 << 10 && b % (1 << 8) == 0 {
        (b as f64 / (1 << 10) as f64, "KB")
    } else {
        (b as f64, "B")
    };
    let t = format!("{v:.2}");
    format!("{} {unit}", t.trim_end_matches('0').trim_end_matches('.'))
}

/// A TLB's geometry for people: `64-entry full` (fully associative) or `1536-entry 12-way`.
fn geometry_text(entries: u32, ways: u32) -> String {
    if ways == entries {
        format!("{entries}-entry full")
    } else if ways == 1 {
        format!("{entries}-entry direct")
    } else {
        format!("{entries}-entry {ways}-way")
    }
}

/// CSV: one row per TLB structure per system, with the system-wide columns repeated. When a
/// design has caches, four columns follow (`unit`, `writebacks`, `time_cycles`,
/// `translation_share`) and each cache level gets a row of its own (`entries` = lines).
pub fn csv(input: &ReportInput, systems: &[System]) -> String {
    let timed = systems.iter().any(|s| s.caches().is_some());
    let mut out = String::from(
        "config,structure,level,serves,entries,ways,policy,accesses,hits,misses,miss_ratio,page_faults,walks,walk_memory_refs,walk_cache_lines,nested_misses,page_table,page_table_bytes,page_table_bytes_end,cycles_total,references,lookups,status,error",
    );
    out.push_str(if timed { ",unit,writebacks,time_cycles,translation_share\n" } else { "\n" });
    let extra = if timed { ",,,," } else { "" };
    for s in systems {
        if let Some(f) = s.failure() {
            // One row: the design, empty counters, and why it failed.
            let _ = writeln!(
                out,
                "{}{},failed,{}{extra}",
                csv_field(&s.config().name),
                ",".repeat(21),
                csv_field(&failure_message(input, f))
            );
            continue;
        }
        let st = s.stats();
        let time = |unit: &str, writebacks: String| match st.time {
            Some(t) => format!(",{unit},{writebacks},{},{:.6}", t.cycles, t.translation_share()),
            None if timed => format!(",{unit},{writebacks},,"),
            None => String::new(),
        };
        let system_cols = format!(
            "{},{},{},{},{},{},{},{},{},{},{}",
            st.page_faults,
            st.walks.count,
            st.walks.memory_refs,
            st.walks.cache_lines,
            st.walks.nested_misses,
            s.config().page_table.kind.name(),
            st.page_table.peak.table_bytes,
            st.page_table.end.table_bytes,
            st.cycles.total(),
            input.summary.trace.references,
            st.lookups,
        );
        for (x, c) in s.structures().iter().zip(&st.tlb) {
            let g = x.tlb.geometry();
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{:.6},{system_cols},ok,{}",
                csv_field(&s.config().name),
                csv_field(&x.name),
                x.level,
                x.serves.map(|v| v.name()).unwrap_or("page-table"),
                g.entries,
                g.ways,
                g.policy.name(),
                c.accesses,
                c.hits,
                c.misses,
                ratio(c.misses, c.accesses),
                time("tlb", String::new()),
            );
        }
        if let Some(h) = s.caches() {
            for (l, c) in h.levels().iter().zip(&st.caches) {
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{},{:.6},{system_cols},ok,{}",
                    csv_field(&s.config().name),
                    csv_field(&l.name),
                    l.level,
                    l.serves.name(),
                    l.sets * l.ways as u64,
                    l.ways,
                    l.policy.name(),
                    c.accesses,
                    c.hits,
                    c.misses,
                    ratio(c.misses, c.accesses),
                    time("cache", c.writebacks.to_string()),
                );
            }
        }
    }
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
