//! Charts and tables of `xlat::plot`: the SVG is read back with a small XML reader written here,
//! the tables are parsed back, and the PNG header is read byte by byte.

use std::collections::HashMap;

use xlat::plot::{BarChart, PlotError, Series};

fn series(name: &str, values: &[Option<f64>]) -> Series {
    Series { name: name.into(), values: values.to_vec() }
}

/// Three workloads, three designs; the designs have 3, 2 and 1 measured values.
fn sample() -> BarChart {
    BarChart {
        title: "Page table size".into(),
        x_label: "workload".into(),
        y_label: "relative size".into(),
        categories: vec!["gcc".into(), "coral & ML <dense>".into(), "compress".into()],
        series: vec![
            series("linear", &[Some(1.5), Some(0.25), Some(3.0)]),
            series("hashed", &[Some(1.0), None, Some(1.0)]),
            series("clustered, 16", &[None, Some(0.75), None]),
        ],
        y_max: None,
        reference: Some((1.0, "hashed".into())),
    }
}

/// One element of the SVG: its name, attributes, and the text directly inside it.
#[derive(Debug, Default)]
struct Element {
    name: String,
    attrs: HashMap<String, String>,
    text: String,
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let end = rest[i..].find(';').unwrap_or_else(|| panic!("bare & in {s:?}")) + i;
        out.push_str(match &rest[i + 1..end] {
            "amp" => "&",
            "lt" => "<",
            "gt" => ">",
            "quot" => "\"",
            "apos" => "'",
            other => panic!("unknown entity &{other}; in {s:?}"),
        });
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// A minimal XML reader: panics on unbalanced or unclosed tags, raw `<` or `&` in text, and
/// unquoted attributes; returns the elements in document order.
fn parse_xml(doc: &str) -> Vec<Element> {
    let mut elements: Vec<Element> = Vec::new();
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut rest = doc;
    let mut roots = 0;
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            assert!(rest.trim().is_empty() || !open.is_empty(), "text after the root: {rest:?}");
            if let Some((_, e)) = open.last() {
                elements[*e].text.push_str(&unescape(rest));
            }
            break;
        };
        let text = &rest[..lt];
        if let Some((_, e)) = open.last() {
            elements[*e].text.push_str(&unescape(text));
        } else {
            assert!(text.trim().is_empty(), "text outside the root: {text:?}");
        }
        rest = &rest[lt..];
        if let Some(r) = rest.strip_prefix("<?") {
            rest = &r[r.find("?>").expect("unclosed <?") + 2..];
            continue;
        }
        if let Some(r) = rest.strip_prefix("<!--") {
            rest = &r[r.find("-->").expect("unclosed comment") + 3..];
            continue;
        }
        // Find the closing '>' outside quoted attribute values.
        let mut quote = None;
        let mut end = None;
        for (i, ch) in rest.char_indices().skip(1) {
            match (quote, ch) {
                (None, '"' | '\'') => quote = Some(ch),
                (Some(q), c) if c == q => quote = None,
                (None, '<') => panic!("'<' inside a tag: {:?}", &rest[..i]),
                (None, '>') => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let end = end.expect("unclosed tag");
        let tag = &rest[1..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let (top, _) = open.pop().unwrap_or_else(|| panic!("</{name}> closes nothing"));
            assert_eq!(top, name.trim(), "mismatched closing tag");
            continue;
        }
        let self_closing = tag.ends_with('/');
        let tag = tag.trim_end_matches('/');
        let name_end = tag.find(char::is_whitespace).unwrap_or(tag.len());
        let name = tag[..name_end].to_string();
        assert!(!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == ':' || c == '-'));
        let mut attrs = HashMap::new();
        let mut a = tag[name_end..].trim_start();
        while !a.is_empty() {
            let eq = a.find('=').unwrap_or_else(|| panic!("attribute without value in <{name}>: {a:?}"));
            let key = a[..eq].trim().to_string();
            let v = &a[eq + 1..];
            let q = v.chars().next().expect("attribute value");
            assert!(q == '"' || q == '\'', "unquoted attribute {key} in <{name}>");
            let close = v[1..].find(q).expect("unterminated attribute") + 1;
            assert!(attrs.insert(key.clone(), unescape(&v[1..close])).is_none(), "duplicate attribute {key}");
            a = v[close + 1..].trim_start();
        }
        if open.is_empty() {
            roots += 1;
        }
        elements.push(Element { name: name.clone(), attrs, text: String::new() });
        if !self_closing {
            open.push((name, elements.len() - 1));
        }
    }
    assert!(open.is_empty(), "unclosed tags: {open:?}");
    // The writer puts text on its own line: the surrounding white space is layout only.
    for e in &mut elements {
        e.text = e.text.trim().to_string();
    }
    assert_eq!(roots, 1, "one root element");
    assert_eq!(elements[0].name, "svg");
    elements
}

fn num(e: &Element, key: &str) -> f64 {
    e.attrs.get(key).unwrap_or_else(|| panic!("<{}> has no {key}", e.name)).parse().unwrap()
}

fn texts(elements: &[Element]) -> Vec<&str> {
    elements.iter().filter(|e| e.name == "text").map(|e| e.text.as_str()).collect()
}

/// The filled rectangles drawn in `fill`.
fn rects<'a>(elements: &'a [Element], fill: &str) -> Vec<&'a Element> {
    elements.iter().filter(|e| e.name == "rect" && e.attrs.get("fill").map(String::as_str) == Some(fill)).collect()
}

/// The legend swatch of a series is the rectangle drawn just before the series' name.
fn legend_fill(elements: &[Element], name: &str) -> String {
    let at = elements.iter().position(|e| e.name == "text" && e.text == name).expect("legend text");
    let swatch = &elements[at - 1];
    assert_eq!(swatch.name, "rect", "no swatch before {name:?}");
    swatch.attrs["fill"].clone()
}

fn present(s: &Series) -> Vec<f64> {
    s.values.iter().flatten().copied().collect()
}

#[test]
fn svg_is_well_formed_and_names_every_category_and_series() {
    let chart = sample();
    let svg = chart.svg().unwrap();
    let elements = parse_xml(&svg);
    assert_eq!((num(&elements[0], "width"), num(&elements[0], "height")), (1200.0, 700.0));
    let texts = texts(&elements);
    for name in chart.categories.iter().chain(chart.series.iter().map(|s| &s.name)) {
        assert!(texts.contains(&name.as_str()), "{name:?} missing from {texts:?}");
    }
    for label in [&chart.title, &chart.x_label, &chart.y_label] {
        assert!(texts.contains(&label.as_str()), "{label:?} missing");
    }
    // The reference line's label (also a series name here) appears twice.
    assert_eq!(texts.iter().filter(|t| **t == "hashed").count(), 2);
}

#[test]
fn one_bar_per_present_value_in_its_series_colour_and_none_draws_nothing() {
    let chart = sample();
    let elements = parse_xml(&chart.svg().unwrap());
    let mut fills = Vec::new();
    for s in &chart.series {
        let fill = legend_fill(&elements, &s.name);
        assert_ne!(fill, "none");
        // The swatch plus one bar per measured value.
        assert_eq!(rects(&elements, &fill).len(), present(s).len() + 1, "series {:?}", s.name);
        fills.push(fill);
    }
    fills.sort();
    fills.dedup();
    assert_eq!(fills.len(), chart.series.len(), "each series has its own colour");
    // Every filled rectangle is the background, a swatch or a bar.
    let filled = elements.iter().filter(|e| e.name == "rect" && e.attrs["fill"] != "none").count();
    let values: usize = chart.series.iter().map(|s| present(s).len()).sum();
    assert_eq!(filled, 1 + chart.series.len() + values);
}

#[test]
fn bar_heights_are_proportional_to_values_and_grouped_by_category() {
    let chart = sample();
    let elements = parse_xml(&chart.svg().unwrap());
    let linear = &chart.series[0];
    let bars: Vec<&Element> = rects(&elements, &legend_fill(&elements, &linear.name)).into_iter().skip(1).collect();
    let values = present(linear);
    assert_eq!(bars.len(), values.len());
    // All bars stand on the same baseline (no negative values).
    let base: Vec<f64> = bars.iter().map(|b| num(b, "y") + num(b, "height")).collect();
    assert!(base.iter().all(|b| *b == base[0]), "{base:?}");
    let unit = num(bars[2], "height") / values[2];
    for (b, v) in bars.iter().zip(&values) {
        assert!((num(b, "height") - v * unit).abs() <= 1.5, "value {v}: height {}", num(b, "height"));
    }
    // Bars of one category sit between those of the previous and next category.
    let hashed: Vec<&Element> = rects(&elements, &legend_fill(&elements, "hashed")).into_iter().skip(1).collect();
    let clustered: Vec<&Element> =
        rects(&elements, &legend_fill(&elements, "clustered, 16")).into_iter().skip(1).collect();
    let x = |e: &Element| num(e, "x");
    assert!(x(bars[0]) < x(hashed[0]) && x(hashed[0]) < x(bars[1]));
    assert!(x(bars[1]) < x(clustered[0]) && x(clustered[0]) < x(bars[2]));
    assert!(x(bars[2]) < x(hashed[1]));
}

#[test]
fn bars_above_y_max_are_cut_and_marked_with_their_value() {
    let mut chart = sample();
    chart.y_max = Some(5.0);
    chart.series[0].values = vec![Some(12.5), Some(2.5), Some(5.0)];
    chart.series[2].values = vec![None, Some(7.25), None];
    let elements = parse_xml(&chart.svg().unwrap());
    let cut: Vec<f64> = chart.series.iter().flat_map(present).filter(|v| *v > 5.0).collect();
    assert_eq!(cut.len(), 2);
    assert_eq!(elements.iter().filter(|e| e.name == "polygon").count(), cut.len(), "one mark per cut bar");
    let numbers: Vec<f64> = texts(&elements).iter().filter_map(|t| t.parse::<f64>().ok()).collect();
    for v in &cut {
        assert!(numbers.iter().any(|n| (n - v).abs() <= v * 0.01), "no label for {v} in {numbers:?}");
    }
    // Cut bars reach exactly the top of the axis, as high as a bar of exactly y_max.
    let linear: Vec<&Element> = rects(&elements, &legend_fill(&elements, "linear")).into_iter().skip(1).collect();
    let clustered: Vec<&Element> =
        rects(&elements, &legend_fill(&elements, "clustered, 16")).into_iter().skip(1).collect();
    let top = num(linear[2], "y");
    assert_eq!(num(linear[0], "y"), top);
    assert_eq!(num(clustered[0], "y"), top);
    assert_eq!(num(linear[0], "height"), num(linear[2], "height"));
    // 2.5 is half of y_max.
    assert!((num(linear[1], "height") * 2.0 - num(linear[2], "height")).abs() <= 2.0);
    // No mark without a cut bar.
    chart.y_max = Some(20.0);
    let elements = parse_xml(&chart.svg().unwrap());
    assert_eq!(elements.iter().filter(|e| e.name == "polygon").count(), 0);
}

#[test]
fn long_category_names_and_many_series_still_draw() {
    let categories: Vec<String> = (0..12).map(|i| format!("a rather long workload name {i}")).collect();
    let chart = BarChart {
        title: "Many".into(),
        x_label: String::new(),
        y_label: String::new(),
        series: (0..14)
            .map(|j| Series {
                name: format!("design {j}"),
                values: (0..12).map(|i| if (i + j) % 5 == 0 { None } else { Some((i * j) as f64 / 7.0) }).collect(),
            })
            .collect(),
        categories,
        y_max: None,
        reference: None,
    };
    let elements = parse_xml(&chart.svg().unwrap());
    let rotated =
        elements.iter().filter(|e| e.name == "text" && e.attrs.get("transform").is_some_and(|t| t.contains("270")));
    assert_eq!(rotated.count(), chart.categories.len(), "long category names are rotated");
    let mut fills: Vec<String> = chart.series.iter().map(|s| legend_fill(&elements, &s.name)).collect();
    for (s, fill) in chart.series.iter().zip(&fills) {
        assert_eq!(rects(&elements, fill).len(), present(s).len() + 1, "series {:?}", s.name);
    }
    fills.sort();
    fills.dedup();
    assert_eq!(fills.len(), 14);
}

#[test]
fn svg_is_deterministic_and_write_svg_writes_it() {
    let chart = sample();
    let a = chart.svg().unwrap();
    assert_eq!(a, chart.svg().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fig.svg");
    chart.write_svg(&path).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), a);
}

/// An RFC 4180 reader: quoted fields with doubled quotes.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for line in text.lines() {
        let mut row = Vec::new();
        let mut field = String::new();
        let mut quoted = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    field.push('"');
                    chars.next();
                }
                (true, '"') => quoted = false,
                (false, '"') if field.is_empty() => quoted = true,
                (false, ',') => row.push(std::mem::take(&mut field)),
                (_, c) => field.push(c),
            }
        }
        assert!(!quoted, "unterminated quote in {line:?}");
        row.push(field);
        rows.push(row);
    }
    rows
}

#[test]
fn csv_round_trips_names_and_values_exactly() {
    let mut chart = sample();
    chart.series[1].name = "say \"hashed\"".into();
    chart.series[0].values[1] = Some(0.1 + 0.2); // not short in decimal
    chart.series[0].values[2] = Some(1e-7);
    let rows = parse_csv(&chart.csv());
    assert!(chart.csv().ends_with('\n'));
    let mut header = vec!["category".to_string()];
    header.extend(chart.series.iter().map(|s| s.name.clone()));
    assert_eq!(rows[0], header);
    assert_eq!(rows.len(), 1 + chart.categories.len());
    for (i, row) in rows[1..].iter().enumerate() {
        assert_eq!(row[0], chart.categories[i]);
        assert_eq!(row.len(), 1 + chart.series.len());
        for (j, s) in chart.series.iter().enumerate() {
            let got = if row[j + 1].is_empty() { None } else { Some(row[j + 1].parse::<f64>().unwrap()) };
            assert_eq!(got, s.values[i], "row {i}, series {j}");
        }
    }
}

/// Splits a Markdown table row on unescaped pipes.
fn md_cells(line: &str) -> Vec<String> {
    let inner = line.trim().strip_prefix('|').unwrap().strip_suffix('|').unwrap();
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cells.last_mut().unwrap().push('|');
                chars.next();
            }
            '|' => cells.push(String::new()),
            c => cells.last_mut().unwrap().push(c),
        }
    }
    cells.into_iter().map(|c| c.trim().to_string()).collect()
}

#[test]
fn markdown_round_trips_values_to_the_requested_digits() {
    let mut chart = sample();
    chart.categories[0] = "gcc | cc1".into();
    chart.series[0].values[0] = Some(1.23456);
    for digits in [0, 2, 4] {
        let md = chart.markdown(digits);
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), 2 + chart.categories.len());
        let header = md_cells(lines[0]);
        assert_eq!(header[0], "workload");
        assert_eq!(&header[1..], chart.series.iter().map(|s| s.name.clone()).collect::<Vec<_>>());
        let rule = md_cells(lines[1]);
        assert_eq!(rule.len(), header.len());
        assert!(rule.iter().all(|c| c.trim_end_matches(':').trim_start_matches(':').chars().all(|c| c == '-')));
        for (i, line) in lines[2..].iter().enumerate() {
            let cells = md_cells(line);
            assert_eq!(cells.len(), header.len());
            assert_eq!(cells[0], chart.categories[i]);
            for (j, s) in chart.series.iter().enumerate() {
                match s.values[i] {
                    None => assert!(cells[j + 1].parse::<f64>().is_err(), "missing value shown as {:?}", cells[j + 1]),
                    Some(v) => {
                        let cell = &cells[j + 1];
                        let decimals = cell.split('.').nth(1).map_or(0, str::len);
                        assert_eq!(decimals, digits, "{cell:?}");
                        let got: f64 = cell.parse().unwrap();
                        assert!((got - v).abs() <= 0.5 * 10f64.powi(-(digits as i32)) + 1e-12, "{got} vs {v}");
                    }
                }
            }
        }
    }
}

#[test]
fn png_has_the_signature_and_size() {
    let mut chart = sample();
    chart.y_max = Some(2.0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fig.png");
    chart.write_png(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(u32::from_be_bytes(bytes[8..12].try_into().unwrap()), 13, "IHDR length");
    assert_eq!(&bytes[12..16], b"IHDR");
    let width = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!((width, height), (1200, 700));
}

#[test]
fn bad_data_is_refused_with_a_message_naming_it() {
    let check = |chart: BarChart, words: &[&str]| {
        let err = chart.svg().unwrap_err();
        assert!(matches!(err, PlotError::Invalid { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(!msg.contains('\n'));
        for w in words {
            assert!(msg.contains(w), "{msg:?} lacks {w:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.png");
        assert!(chart.write_png(&path).is_err());
        assert!(!path.exists(), "no file for a refused chart");
    };
    let mut c = sample();
    c.series[1].values.pop();
    check(c, &["hashed", "2 values", "3 categories"]);
    let mut c = sample();
    c.series[0].values[1] = Some(f64::NAN);
    check(c, &["linear", "coral", "not finite"]);
    let mut c = sample();
    c.y_max = Some(0.0);
    check(c, &["y_max"]);
    let mut c = sample();
    c.categories.clear();
    for s in &mut c.series {
        s.values.clear();
    }
    check(c, &["no categories"]);
}
