//! Grouped bar charts, line charts and tables for paper reproductions and `xlat curve`.
//!
//! A [`LineChart`] draws curves (a miss ratio against TLB entries, say): one line per series
//! through every one of its points, over a base-2 logarithmic x axis and a linear or base-10
//! logarithmic y axis, with the drawing library's line series. A [`Figure`] is either kind.
//!
//! A [`BarChart`] holds one value per series per category (a workload, say) and writes itself as
//! an SVG chart, a PNG chart, CSV and a GitHub Markdown table. Both charts share one layout of
//! [`WIDTH`] x [`HEIGHT`] pixels: a title, a legend, one group of bars per category (one bar per
//! series, in series order), a y axis with grid lines, an optional reference line (talluri95's
//! Figure 9 draws y = 1.0 for the hashed page table) and, when [`BarChart::y_max`] is set, bars
//! cut at that value with a small triangle and their real value above them.
//!
//! The layout never asks a font for text sizes, so the SVG needs no font file (the viewer picks a
//! `sans-serif` font). PNG text is drawn with [`PNG_FONT_FILE`], read at run time from the Debian
//! package [`PNG_FONT_PACKAGE`]; without it [`BarChart::write_png`] returns
//! [`PlotError::MissingFont`].
//!
//! ```
//! use xlat::plot::{BarChart, Series};
//!
//! let chart = BarChart {
//!     title: "Page table size".into(),
//!     x_label: "workload".into(),
//!     y_label: "size / hashed size".into(),
//!     categories: vec!["gcc".into(), "coral".into()],
//!     series: vec![
//!         Series { name: "linear".into(), values: vec![Some(7.5), Some(0.5)] },
//!         Series { name: "clustered".into(), values: vec![Some(0.75), None] },
//!     ],
//!     y_max: Some(5.0),
//!     reference: Some((1.0, "hashed".into())),
//! };
//! assert_eq!(chart.csv(), "category,linear,clustered\ngcc,7.5,0.75\ncoral,0.5,\n");
//! assert!(chart.svg()?.contains("clustered"));
//! # Ok::<(), xlat::plot::PlotError>(())
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One curve of a [`LineChart`]: its points `(x, y)`, drawn in x order.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// Legend name.
    pub name: String,
    /// The points, each drawn.
    pub points: Vec<(f64, f64)>,
}

/// Curves on one pair of axes: x on a base-2 logarithmic axis (sizes), y linear or, with
/// [`LineChart::log_y`], base-10 logarithmic. On a logarithmic y axis a value of 0 is drawn on
/// the axis floor, half the smallest positive value.
#[derive(Clone, Debug, PartialEq)]
pub struct LineChart {
    /// Title above the chart.
    pub title: String,
    /// Label of the x axis.
    pub x_label: String,
    /// Label of the y axis.
    pub y_label: String,
    /// The curves, in legend order.
    pub lines: Vec<Line>,
    /// A logarithmic y axis.
    pub log_y: bool,
    /// A horizontal line at this value with this label.
    pub reference: Option<(f64, String)>,
}

/// A figure of a reproduction: bars by category or curves.
#[derive(Clone, Debug, PartialEq)]
pub enum Figure {
    /// A grouped bar chart.
    Bars(BarChart),
    /// Curves.
    Lines(LineChart),
}

impl From<BarChart> for Figure {
    fn from(c: BarChart) -> Figure {
        Figure::Bars(c)
    }
}

impl From<LineChart> for Figure {
    fn from(c: LineChart) -> Figure {
        Figure::Lines(c)
    }
}

impl Figure {
    /// The title.
    pub fn title(&self) -> &str {
        match self {
            Figure::Bars(c) => &c.title,
            Figure::Lines(c) => &c.title,
        }
    }

    /// The values as CSV.
    pub fn csv(&self) -> String {
        match self {
            Figure::Bars(c) => c.csv(),
            Figure::Lines(c) => c.csv(),
        }
    }

    /// The values as a Markdown table with `digits` decimals.
    pub fn markdown(&self, digits: usize) -> String {
        match self {
            Figure::Bars(c) => c.markdown(digits),
            Figure::Lines(c) => c.markdown(digits),
        }
    }

    /// The chart as SVG text.
    pub fn svg(&self) -> Result<String, PlotError> {
        match self {
            Figure::Bars(c) => c.svg(),
            Figure::Lines(c) => c.svg(),
        }
    }

    /// Writes the SVG chart to `path`.
    pub fn write_svg(&self, path: &Path) -> Result<(), PlotError> {
        match self {
            Figure::Bars(c) => c.write_svg(path),
            Figure::Lines(c) => c.write_svg(path),
        }
    }

    /// Writes the PNG chart to `path`.
    pub fn write_png(&self, path: &Path) -> Result<(), PlotError> {
        match self {
            Figure::Bars(c) => c.write_png(path),
            Figure::Lines(c) => c.write_png(path),
        }
    }
}

impl LineChart {
    /// The chart as SVG text, [`WIDTH`] x [`HEIGHT`]: one polyline per line, through each of
    /// its points.
    pub fn svg(&self) -> Result<String, PlotError> {
        self.check()?;
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
            self.draw(&root)?;
            root.present().map_err(|e| self.draw_error(e))?;
        }
        Ok(out)
    }

    /// Writes [`LineChart::svg`] to `path`.
    pub fn write_svg(&self, path: &Path) -> Result<(), PlotError> {
        write_text(path, &self.svg()?)
    }

    /// Draws the chart as a PNG file at `path` (text in [`PNG_FONT_FILE`]).
    pub fn write_png(&self, path: &Path) -> Result<(), PlotError> {
        self.check()?;
        png_font()?;
        let mut rgb = vec![0u8; WIDTH as usize * HEIGHT as usize * 3];
        {
            let root = BitMapBackend::with_buffer(&mut rgb, (WIDTH, HEIGHT)).into_drawing_area();
            self.draw(&root)?;
            root.present().map_err(|e| self.draw_error(e))?;
        }
        write_rgb_png(path, &rgb)
    }

    /// The points as CSV: `series,x,y`, one row per point.
    pub fn csv(&self) -> String {
        let mut out = format!("series,{},{}\n", csv_field(&self.x_label), csv_field(&self.y_label));
        for l in &self.lines {
            for (x, y) in &l.points {
                let _ = writeln!(out, "{},{x},{y}", csv_field(&l.name));
            }
        }
        out
    }

    /// The points as a Markdown table: one row per x value, one column per line.
    pub fn markdown(&self, digits: usize) -> String {
        let mut xs: Vec<f64> = self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let rows = xs.iter().map(|&x| {
            let cells = self.lines.iter().map(|l| l.points.iter().find(|p| p.0 == x).map(|p| p.1));
            (format!("{x}"), cells.collect())
        });
        md_table(&self.x_label, "---:", self.lines.iter().map(|l| l.name.as_str()), rows, digits)
    }

    fn invalid(&self, message: String) -> PlotError {
        PlotError::Invalid { title: self.title.clone(), message }
    }

    fn draw_error<E: std::error::Error + Send + Sync>(&self, e: DrawingAreaErrorKind<E>) -> PlotError {
        draw_error(&self.title, e)
    }

    fn check(&self) -> Result<(), PlotError> {
        if self.lines.iter().all(|l| l.points.is_empty()) {
            return Err(self.invalid("no points to draw".into()));
        }
        for l in &self.lines {
            for &(x, y) in &l.points {
                if !(x.is_finite() && x > 0.0 && y.is_finite() && y >= 0.0) {
                    return Err(self.invalid(format!("line {:?}: point ({x}, {y}) cannot be drawn", l.name)));
                }
            }
        }
        Ok(())
    }

    /// The x range (with a little room on a log scale) and the y range.
    fn ranges(&self) -> ((f64, f64), (f64, f64)) {
        let pts = || self.lines.iter().flat_map(|l| l.points.iter().copied());
        let (mut x0, mut x1) = pts().fold((f64::MAX, f64::MIN), |(a, b), (x, _)| (a.min(x), b.max(x)));
        x0 /= 1.15;
        x1 *= 1.15;
        let mut y1 = pts().fold(0.0f64, |a, (_, y)| a.max(y));
        if let Some((r, _)) = &self.reference {
            y1 = y1.max(*r);
        }
        if self.log_y {
            let y0 = pts().filter(|p| p.1 > 0.0).fold(f64::MAX, |a, (_, y)| a.min(y));
            if y0 == f64::MAX {
                return ((x0, x1), (0.5, 1.0));
            }
            ((x0, x1), (y0 / 2.0, y1 * 1.5))
        } else {
            ((x0, x1), (0.0, if y1 > 0.0 { y1 * 1.05 } else { 1.0 }))
        }
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError> {
        let de = |e| self.draw_error(e);
        let font = |size: u32| FontDesc::new(FontFamily::Name(FAMILY), size as f64, FontStyle::Normal);
        root.fill(&WHITE).map_err(de)?;
        let margin = 16;
        let mut top = margin;
        if !self.title.is_empty() {
            let style = font(TITLE_FONT).style(FontStyle::Bold).color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
            root.draw(&Text::new(self.title.as_str(), (WIDTH as i32 / 2, top), style)).map_err(de)?;
            top += TITLE_FONT as i32 + 10;
        }
        // Legend: centred rows of a short line in the line's colour and its name.
        let rows = legend_rows(self.lines.iter().map(|l| l.name.as_str()), WIDTH as i32 - 2 * margin);
        for (r, row) in rows.iter().enumerate() {
            let row_w: i32 = row.iter().map(|&j| legend_item_w(&self.lines[j].name)).sum::<i32>() - LEGEND_GAP;
            let mut x = (WIDTH as i32 - row_w) / 2;
            let ym = top + r as i32 * LEGEND_ROW + LEGEND_ROW / 2;
            for &j in row {
                let swatch = colour(j).stroke_width(3);
                root.draw(&Rectangle::new([(x, ym - 1), (x + 14, ym + 1)], swatch.filled())).map_err(de)?;
                let style = font(LEGEND_FONT).color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
                root.draw(&Text::new(self.lines[j].name.as_str(), (x + 20, ym), style)).map_err(de)?;
                x += legend_item_w(&self.lines[j].name);
            }
        }
        top += rows.len() as i32 * LEGEND_ROW + 8;
        // Axis names, drawn here so that no text needs measuring.
        let bottom = AXIS_FONT as i32 + margin;
        if !self.x_label.is_empty() {
            let style = font(AXIS_FONT).color(&BLACK).pos(Pos::new(HPos::Center, VPos::Bottom));
            root.draw(&Text::new(self.x_label.as_str(), (WIDTH as i32 / 2, HEIGHT as i32 - margin), style))
                .map_err(de)?;
        }
        if !self.y_label.is_empty() {
            let style = font(AXIS_FONT)
                .transform(FontTransform::Rotate270)
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Top));
            root.draw(&Text::new(self.y_label.as_str(), (margin, (top + HEIGHT as i32 - bottom) / 2), style))
                .map_err(de)?;
        }
        let reserve = if self.reference.is_some() { 110 } else { margin + 8 };
        let area = root.margin(top, bottom, margin + AXIS_FONT as i32 + 6, reserve);
        let ((x0, x1), (y0, y1)) = self.ranges();
        let x = (x0..x1).log_scale().base(2.0);
        if self.log_y {
            self.draw_lines(&area, x, (y0..y1).log_scale(), y0)
        } else {
            self.draw_lines(&area, x, y0..y1, y0)
        }
    }

    /// The axes, grid and lines in `area`, whatever the kind of its y axis (`floor`: where a 0
    /// is drawn).
    fn draw_lines<DB, X, Y>(&self, area: &DrawingArea<DB, Shift>, x: X, y: Y, floor: f64) -> Result<(), PlotError>
    where
        DB: DrawingBackend,
        X: AsRangedCoord<Value = f64>,
        Y: AsRangedCoord<Value = f64>,
        X::CoordDescType: ValueFormatter<f64>,
        Y::CoordDescType: ValueFormatter<f64>,
    {
        let de = |e| self.draw_error(e);
        let font = |size: u32| FontDesc::new(FontFamily::Name(FAMILY), size as f64, FontStyle::Normal);
        let mut chart =
            ChartBuilder::on(area).x_label_area_size(34).y_label_area_size(70).build_cartesian_2d(x, y).map_err(de)?;
        let x_tick = |v: &f64| format!("{}", v.round());
        let y_tick = |v: &f64| tick_text(*v);
        chart
            .configure_mesh()
            .x_labels(24)
            .y_labels(14)
            .x_label_formatter(&x_tick)
            .y_label_formatter(&y_tick)
            .label_style(font(TICK_FONT))
            .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
            .light_line_style(RGBColor(0xf2, 0xf2, 0xf2))
            .axis_style(RGBColor(0x33, 0x33, 0x33))
            .draw()
            .map_err(de)?;
        let log = self.log_y;
        for (j, l) in self.lines.iter().enumerate() {
            let mut pts = l.points.clone();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let at = move |(x, y): (f64, f64)| (x, if log && y <= 0.0 { floor } else { y });
            let style = colour(j).stroke_width(2);
            chart.draw_series(LineSeries::new(pts.iter().copied().map(at), style)).map_err(de)?;
            if pts.len() <= 64 {
                chart.draw_series(pts.iter().map(|&p| Circle::new(at(p), 3, colour(j).filled()))).map_err(de)?;
            }
        }
        if let Some((v, label)) = &self.reference {
            let ref_colour = RGBColor(0xb0, 0x00, 0x20);
            let xr = chart.x_range();
            let line = ShapeStyle { color: ref_colour.to_rgba(), filled: false, stroke_width: 2 };
            chart.draw_series(LineSeries::new([(xr.start, *v), (xr.end, *v)], line)).map_err(de)?;
            let (px, py) = chart.backend_coord(&(xr.end, *v));
            let (bx, by) = area.get_base_pixel();
            let style = font(LEGEND_FONT).color(&ref_colour).pos(Pos::new(HPos::Left, VPos::Center));
            area.draw(&Text::new(label.as_str(), (px + 6 - bx, py - by), style)).map_err(de)?;
        }
        Ok(())
    }
}

/// A y tick label with about three significant digits and no trailing zeros: `0.01`, `2.5`, `40`.
fn tick_text(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let decimals = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Writes an RGB buffer of [`WIDTH`] x [`HEIGHT`] as a PNG file.
fn write_rgb_png(path: &Path, rgb: &[u8]) -> Result<(), PlotError> {
    let write_error = |message: String| PlotError::Write { path: path.to_owned(), message };
    let file = std::fs::File::create(path).map_err(|e| write_error(e.to_string()))?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), WIDTH, HEIGHT);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|e| write_error(e.to_string()))?;
    writer.write_image_data(rgb).map_err(|e| write_error(e.to_string()))?;
    writer.finish().map_err(|e| write_error(e.to_string()))
}

/// Width of both charts, in pixels.
pub const WIDTH: u32 = 1200;
/// Height of both charts, in pixels.
pub const HEIGHT: u32 = 700;
/// The font file PNG text is drawn with.
pub const PNG_FONT_FILE: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
/// The Debian package that installs [`PNG_FONT_FILE`].
pub const PNG_FONT_PACKAGE: &str = "fonts-dejavu-core";

/// The font family both charts name (registered under this name for PNG text).
const FAMILY: &str = "sans-serif";

/// One bar per category: `values[i]` belongs to `categories[i]` of the chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend and column name.
    pub name: String,
    /// One value per category; `None` is "not measured" (no bar, an empty cell).
    pub values: Vec<Option<f64>>,
}

/// A grouped bar chart: one group per category, one bar per series in each group.
#[derive(Clone, Debug, PartialEq)]
pub struct BarChart {
    /// Title above the chart.
    pub title: String,
    /// Label under the category axis (also the first column header of the Markdown table).
    pub x_label: String,
    /// Label of the value axis.
    pub y_label: String,
    /// The groups along the x axis, left to right (the rows of the tables).
    pub categories: Vec<String>,
    /// The bars of each group, in this order (the columns of the tables).
    pub series: Vec<Series>,
    /// Top of the value axis: bars above it are cut there and marked with a triangle and their
    /// real value. `None` fits the axis to the largest value.
    pub y_max: Option<f64>,
    /// A horizontal line at this value with this label (e.g. `1.0`, `"hashed"`).
    pub reference: Option<(f64, String)>,
}

/// Why a chart could not be drawn or written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The chart's data cannot be drawn (lengths differ, a value is not finite, ...).
    #[error("chart {title:?}: {message}")]
    Invalid {
        /// The chart's title.
        title: String,
        /// What is wrong.
        message: String,
    },
    /// The font file for PNG text is not installed.
    #[error("font file {} not found: PNG charts need it, install the Debian package {package}", path.display())]
    MissingFont {
        /// The font file looked for.
        path: PathBuf,
        /// The Debian package that installs it.
        package: &'static str,
    },
    /// The font file exists but cannot be read or is not a font.
    #[error("font file {}: {message}", path.display())]
    BadFont {
        /// The font file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// Writing a chart failed.
    #[error("{}: {message}", path.display())]
    Write {
        /// The file being written.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The drawing library reported an error.
    #[error("drawing chart {title:?}: {message}")]
    Draw {
        /// The chart's title.
        title: String,
        /// The drawing library's message.
        message: String,
    },
}

impl BarChart {
    /// The chart as SVG text, [`WIDTH`] x [`HEIGHT`]: the same chart gives the same text.
    pub fn svg(&self) -> Result<String, PlotError> {
        let layout = self.layout()?;
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
            self.draw(&root, &layout)?;
            root.present().map_err(|e| self.draw_error(e))?;
        }
        Ok(out)
    }

    /// Writes [`BarChart::svg`] to `path`.
    pub fn write_svg(&self, path: &Path) -> Result<(), PlotError> {
        write_text(path, &self.svg()?)
    }

    /// Draws the chart as a [`WIDTH`] x [`HEIGHT`] PNG file at `path`, with text in
    /// [`PNG_FONT_FILE`] ([`PlotError::MissingFont`] when it is not installed).
    pub fn write_png(&self, path: &Path) -> Result<(), PlotError> {
        let layout = self.layout()?;
        png_font()?;
        let mut rgb = vec![0u8; WIDTH as usize * HEIGHT as usize * 3];
        {
            let root = BitMapBackend::with_buffer(&mut rgb, (WIDTH, HEIGHT)).into_drawing_area();
            self.draw(&root, &layout)?;
            root.present().map_err(|e| self.draw_error(e))?;
        }
        write_rgb_png(path, &rgb)
    }

    /// The values as CSV: a header `category,<series names>`, then one row per category; a
    /// missing value is an empty cell. Numbers are written so that they parse back exactly.
    pub fn csv(&self) -> String {
        let mut out = String::from("category");
        for s in &self.series {
            out.push(',');
            out.push_str(&csv_field(&s.name));
        }
        out.push('\n');
        for (i, c) in self.categories.iter().enumerate() {
            out.push_str(&csv_field(c));
            for s in &self.series {
                out.push(',');
                if let Some(Some(v)) = s.values.get(i) {
                    let _ = write!(out, "{v}");
                }
            }
            out.push('\n');
        }
        out
    }

    /// The values as a GitHub Markdown table, one row per category, one column per series,
    /// numbers with `digits` decimals and `—` for a missing value. The first header cell is
    /// [`BarChart::x_label`] (or `category` when it is empty).
    pub fn markdown(&self, digits: usize) -> String {
        let first = if self.x_label.is_empty() { "category" } else { &self.x_label };
        let rows = self
            .categories
            .iter()
            .enumerate()
            .map(|(i, c)| (md_cell(c), self.series.iter().map(|s| s.values.get(i).copied().flatten()).collect()));
        md_table(first, "---", self.series.iter().map(|s| s.name.as_str()), rows, digits)
    }

    fn invalid(&self, message: String) -> PlotError {
        PlotError::Invalid { title: self.title.clone(), message }
    }

    fn draw_error<E: std::error::Error + Send + Sync>(&self, e: DrawingAreaErrorKind<E>) -> PlotError {
        draw_error(&self.title, e)
    }

    /// Checks the data and places everything.
    fn layout(&self) -> Result<Layout, PlotError> {
        let n = self.categories.len();
        if n == 0 {
            return Err(self.invalid("no categories to draw".into()));
        }
        let mut lo = 0.0f64;
        let mut hi = f64::NEG_INFINITY;
        for s in &self.series {
            if s.values.len() != n {
                return Err(self.invalid(format!(
                    "series {:?} has {} values for {} categories",
                    s.name,
                    s.values.len(),
                    n
                )));
            }
            for (i, v) in s.values.iter().enumerate() {
                if let Some(v) = *v {
                    if !v.is_finite() {
                        return Err(self.invalid(format!(
                            "series {:?}, category {:?}: value {v} is not finite",
                            s.name, self.categories[i]
                        )));
                    }
                    lo = lo.min(v);
                    hi = hi.max(v);
                }
            }
        }
        if let Some((r, _)) = &self.reference {
            if !r.is_finite() {
                return Err(self.invalid(format!("reference line value {r} is not finite")));
            }
            lo = lo.min(*r);
            hi = hi.max(*r);
        }
        let top = match self.y_max {
            Some(m) if !m.is_finite() || m <= lo.max(0.0) => {
                return Err(
                    self.invalid(format!("y_max {m} must be a finite number above 0 and above the lowest value {lo}"))
                )
            }
            Some(m) => m,
            None if hi > lo => hi,
            None => lo + 1.0,
        };
        let step = nice_step((top - lo) / 6.0);
        let (lo, top) = if self.y_max.is_some() {
            ((lo / step).floor() * step, top)
        } else {
            ((lo / step).floor() * step, (top / step - 1e-9).ceil() * step)
        };
        let decimals = if step >= 1.0 { 0 } else { (-step.log10().floor()) as usize };
        let mut ticks = Vec::new();
        let mut k = (lo / step).ceil();
        while k * step <= top + step * 1e-9 {
            ticks.push((k * step, format!("{:.decimals$}", k * step)));
            k += 1.0;
        }

        // Truncated bars and their labels.
        let cut = |v: f64| v > top;
        let cut_labels: Vec<String> = self
            .series
            .iter()
            .flat_map(|s| s.values.iter().flatten().filter(|v| cut(**v)).map(|v| fmt_value(*v)))
            .collect();

        // Horizontal bands, top down.
        let margin = 16;
        let title_y = margin;
        let legend_y = title_y + if self.title.is_empty() { 0 } else { 36 };
        let legend_rows = legend_rows(self.series.iter().map(|s| s.name.as_str()), (WIDTH as i32) - 2 * margin);
        let legend_h = legend_rows.len() as i32 * LEGEND_ROW;

        let tick_w = ticks.iter().map(|(_, t)| text_width(t, TICK_FONT)).max().unwrap_or(0);
        let left = margin + if self.y_label.is_empty() { 0 } else { AXIS_FONT as i32 + 8 } + tick_w + 10;
        // The reference line's label sits right of the plot, level with the line.
        let ref_w = match &self.reference {
            Some((r, label)) if *r <= top && !label.is_empty() => text_width(label, LEGEND_FONT) + 8,
            _ => 0,
        };
        let right = WIDTH as i32 - margin - ref_w;
        let group_w = (right - left) as f64 / n as f64;
        let bars = self.series.len().max(1);
        let bar_w = (group_w * 0.8 / bars as f64).max(1.0);

        let cut_w = cut_labels.iter().map(|t| text_width(t, VALUE_FONT)).max().unwrap_or(0);
        let cut_rotated = cut_w as f64 > bar_w + group_w * 0.2 / bars as f64;
        let cut_band = match (cut_labels.is_empty(), cut_rotated) {
            (true, _) => 0,
            (false, false) => MARK_H + 4 + VALUE_FONT as i32 + 4,
            (false, true) => MARK_H + 4 + cut_w + 4,
        };
        let plot_top = legend_y + legend_h + 8 + cut_band;

        let cat_w = self.categories.iter().map(|c| text_width(c, CAT_FONT)).max().unwrap_or(0);
        let cat_rotated = cat_w as f64 > group_w - 6.0;
        let cat_h = if cat_rotated { cat_w.min(MAX_ROTATED_LABEL) } else { CAT_FONT as i32 + 2 };
        let x_label_h = if self.x_label.is_empty() { 0 } else { AXIS_FONT as i32 + 10 };
        let plot_bottom = HEIGHT as i32 - margin - x_label_h - cat_h - 8;
        if plot_bottom - plot_top < 60 {
            return Err(self.invalid("labels leave no room for the bars (shorten the names)".into()));
        }
        Ok(Layout {
            lo,
            top,
            ticks,
            title_y,
            legend_y,
            legend_rows,
            left,
            right,
            plot_top,
            plot_bottom,
            group_w,
            bar_w,
            cut_rotated,
            cat_rotated,
            margin,
        })
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, l: &Layout) -> Result<(), PlotError> {
        let de = |e| self.draw_error(e);
        let font = |size: u32| FontDesc::new(FontFamily::Name(FAMILY), size as f64, FontStyle::Normal);
        let black = BLACK;
        let grid = RGBColor(0xdd, 0xdd, 0xdd);
        let axis = RGBColor(0x33, 0x33, 0x33);
        let ref_colour = RGBColor(0xb0, 0x00, 0x20);
        let y = |v: f64| -> i32 {
            let f = (v - l.lo) / (l.top - l.lo);
            l.plot_bottom - (f * (l.plot_bottom - l.plot_top) as f64).round() as i32
        };

        root.fill(&WHITE).map_err(de)?;
        if !self.title.is_empty() {
            let style = font(TITLE_FONT).style(FontStyle::Bold).color(&black).pos(Pos::new(HPos::Center, VPos::Top));
            root.draw(&Text::new(self.title.as_str(), (WIDTH as i32 / 2, l.title_y), style)).map_err(de)?;
        }

        // Legend: centred rows of swatch + name.
        for (r, row) in l.legend_rows.iter().enumerate() {
            let row_w: i32 = row.iter().map(|&j| legend_item_w(&self.series[j].name)).sum::<i32>() - LEGEND_GAP;
            let mut x = (WIDTH as i32 - row_w) / 2;
            let ym = l.legend_y + r as i32 * LEGEND_ROW + LEGEND_ROW / 2;
            for &j in row {
                let c = colour(j);
                root.draw(&Rectangle::new([(x, ym - 7), (x + 14, ym + 7)], c.filled())).map_err(de)?;
                let style = font(LEGEND_FONT).color(&black).pos(Pos::new(HPos::Left, VPos::Center));
                root.draw(&Text::new(self.series[j].name.as_str(), (x + 20, ym), style)).map_err(de)?;
                x += legend_item_w(&self.series[j].name);
            }
        }

        // Grid lines and tick labels.
        for (v, label) in &l.ticks {
            let py = y(*v);
            root.draw(&PathElement::new(vec![(l.left, py), (l.right, py)], grid)).map_err(de)?;
            root.draw(&PathElement::new(vec![(l.left - 5, py), (l.left, py)], axis)).map_err(de)?;
            let style = font(TICK_FONT).color(&black).pos(Pos::new(HPos::Right, VPos::Center));
            root.draw(&Text::new(label.as_str(), (l.left - 8, py), style)).map_err(de)?;
        }
        if !self.y_label.is_empty() {
            let style = font(AXIS_FONT)
                .transform(FontTransform::Rotate270)
                .color(&black)
                .pos(Pos::new(HPos::Center, VPos::Top));
            let mid = (l.plot_top + l.plot_bottom) / 2;
            root.draw(&Text::new(self.y_label.as_str(), (l.margin, mid), style)).map_err(de)?;
        }

        // Bars.
        let zero = y(0.0);
        for (i, category) in self.categories.iter().enumerate() {
            let g0 = l.left as f64 + i as f64 * l.group_w + l.group_w * 0.1;
            for (j, s) in self.series.iter().enumerate() {
                let Some(v) = s.values[i] else { continue };
                let x0 = (g0 + j as f64 * l.bar_w).round() as i32;
                let mut x1 = (g0 + (j + 1) as f64 * l.bar_w).round() as i32;
                if x1 - x0 > 4 {
                    x1 -= 1; // a white gap between neighbours
                }
                let x1 = x1.max(x0 + 1);
                let cut = v > l.top;
                let mut top = y(v.min(l.top));
                if top == zero {
                    top = zero - 1; // a measured zero still shows as a line
                }
                let (ya, yb) = if top < zero { (top, zero) } else { (zero, top) };
                root.draw(&Rectangle::new([(x0, ya), (x1, yb)], colour(j).filled())).map_err(de)?;
                if cut {
                    let cx = (x0 + x1) / 2;
                    let half = ((x1 - x0) / 2).clamp(3, 6);
                    let base = l.plot_top - 2;
                    let mark = vec![(cx - half, base), (cx + half, base), (cx, base - MARK_H)];
                    root.draw(&Polygon::new(mark, black.filled())).map_err(de)?;
                    let label = fmt_value(v);
                    let at = (cx, base - MARK_H - 3);
                    let style = if l.cut_rotated {
                        font(VALUE_FONT)
                            .transform(FontTransform::Rotate270)
                            .color(&black)
                            .pos(Pos::new(HPos::Left, VPos::Center))
                    } else {
                        font(VALUE_FONT).color(&black).pos(Pos::new(HPos::Center, VPos::Bottom))
                    };
                    root.draw(&Text::new(label, at, style)).map_err(de)?;
                }
            }
            // Category label under the group.
            let cx = (l.left as f64 + (i as f64 + 0.5) * l.group_w).round() as i32;
            let text = if l.cat_rotated { clip_label(category, MAX_ROTATED_LABEL, CAT_FONT) } else { category.clone() };
            let style = if l.cat_rotated {
                font(CAT_FONT)
                    .transform(FontTransform::Rotate270)
                    .color(&black)
                    .pos(Pos::new(HPos::Right, VPos::Center))
            } else {
                font(CAT_FONT).color(&black).pos(Pos::new(HPos::Center, VPos::Top))
            };
            root.draw(&Text::new(text, (cx, l.plot_bottom + 6), style)).map_err(de)?;
        }

        // Axes, zero line, reference line.
        root.draw(&PathElement::new(vec![(l.left, l.plot_top), (l.left, l.plot_bottom)], axis)).map_err(de)?;
        root.draw(&PathElement::new(vec![(l.left, l.plot_bottom), (l.right, l.plot_bottom)], axis)).map_err(de)?;
        if zero != l.plot_bottom {
            root.draw(&PathElement::new(vec![(l.left, zero), (l.right, zero)], axis)).map_err(de)?;
        }
        if let Some((v, label)) = &self.reference {
            if *v >= l.lo && *v <= l.top {
                let py = y(*v);
                let line = ShapeStyle { color: ref_colour.to_rgba(), filled: false, stroke_width: 2 };
                root.draw(&PathElement::new(vec![(l.left, py), (l.right, py)], line)).map_err(de)?;
                let style = font(LEGEND_FONT).color(&ref_colour).pos(Pos::new(HPos::Left, VPos::Center));
                root.draw(&Text::new(label.as_str(), (l.right + 6, py), style)).map_err(de)?;
            }
        }
        if !self.x_label.is_empty() {
            let style = font(AXIS_FONT).color(&black).pos(Pos::new(HPos::Center, VPos::Bottom));
            let at = ((l.left + l.right) / 2, HEIGHT as i32 - l.margin);
            root.draw(&Text::new(self.x_label.as_str(), at, style)).map_err(de)?;
        }
        Ok(())
    }
}

const TITLE_FONT: u32 = 26;
const LEGEND_FONT: u32 = 18;
const AXIS_FONT: u32 = 19;
const TICK_FONT: u32 = 16;
const CAT_FONT: u32 = 16;
const VALUE_FONT: u32 = 14;
const LEGEND_ROW: i32 = 24;
const LEGEND_GAP: i32 = 24;
const MARK_H: i32 = 7;
const MAX_ROTATED_LABEL: i32 = 230;

/// Where everything goes, computed before drawing.
struct Layout {
    lo: f64,
    top: f64,
    ticks: Vec<(f64, String)>,
    title_y: i32,
    legend_y: i32,
    legend_rows: Vec<Vec<usize>>,
    left: i32,
    right: i32,
    plot_top: i32,
    plot_bottom: i32,
    group_w: f64,
    bar_w: f64,
    cut_rotated: bool,
    cat_rotated: bool,
    margin: i32,
}

/// A generous estimate of the width of `text` at font `size` (pixels), so that layout needs no
/// font file: DejaVu Sans averages about half its pixel size per character.
fn text_width(text: &str, size: u32) -> i32 {
    (text.chars().count() as f64 * size as f64 * 0.56).ceil() as i32
}

fn legend_item_w(name: &str) -> i32 {
    20 + text_width(name, LEGEND_FONT) + LEGEND_GAP
}

/// Splits the series into legend rows no wider than `width`.
fn legend_rows<'a>(names: impl IntoIterator<Item = &'a str>, width: i32) -> Vec<Vec<usize>> {
    let mut rows: Vec<Vec<usize>> = Vec::new();
    let mut used = 0;
    for (j, name) in names.into_iter().enumerate() {
        let w = legend_item_w(name);
        match rows.last_mut() {
            Some(row) if used + w - LEGEND_GAP <= width => {
                row.push(j);
                used += w;
            }
            _ => {
                rows.push(vec![j]);
                used = w;
            }
        }
    }
    rows
}

/// Shortens `text` to fit `max` pixels at font `size`, keeping its start and its end (where
/// names of one family usually differ) around an ellipsis.
fn clip_label(text: &str, max: i32, size: u32) -> String {
    if text_width(text, size) <= max {
        return text.to_owned();
    }
    let keep = ((max as f64 / (size as f64 * 0.56)) as usize).saturating_sub(1);
    let chars: Vec<char> = text.chars().collect();
    let tail = keep / 2;
    let mut s: String = chars[..keep - tail].iter().collect();
    s.push('…');
    s.extend(&chars[chars.len() - tail..]);
    s
}

/// A step of 1, 2 or 5 times a power of ten at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let p = 10f64.powf(raw.log10().floor());
    let f = raw / p;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * p
}

/// A value label with three significant digits or so.
fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The colour of series `j`: ten well-separated colours, then hues spread by the golden ratio.
fn colour(j: usize) -> RGBColor {
    const PALETTE: [(u8, u8, u8); 10] = [
        (0x1f, 0x77, 0xb4),
        (0xff, 0x7f, 0x0e),
        (0x2c, 0xa0, 0x2c),
        (0xd6, 0x27, 0x28),
        (0x94, 0x67, 0xbd),
        (0x8c, 0x56, 0x4b),
        (0xe3, 0x77, 0xc2),
        (0x7f, 0x7f, 0x7f),
        (0xbc, 0xbd, 0x22),
        (0x17, 0xbe, 0xcf),
    ];
    if let Some(&(r, g, b)) = PALETTE.get(j) {
        return RGBColor(r, g, b);
    }
    let h = ((j - PALETTE.len()) as f64 * 0.618_033_988_75 + 0.05).fract();
    let light = if j % 2 == 0 { 0.42 } else { 0.58 };
    let c = HSLColor(h, 0.6, light).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

/// A CSV field, quoted when it holds a comma, quote or line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// A Markdown table cell: pipes escaped, line breaks as spaces.
/// A Markdown table: a header of `first` and the column names (the first column aligned as
/// `align`, the others right), then one row per label with its cells to `digits` decimals, `—`
/// where a value is missing.
fn md_table<'a>(
    first: &str,
    align: &str,
    columns: impl Iterator<Item = &'a str>,
    rows: impl Iterator<Item = (String, Vec<Option<f64>>)>,
    digits: usize,
) -> String {
    let columns: Vec<&str> = columns.collect();
    let mut out = format!("| {} |", md_cell(first));
    for c in &columns {
        let _ = write!(out, " {} |", md_cell(c));
    }
    let _ = write!(out, "\n| {align} |");
    for _ in &columns {
        out.push_str(" ---: |");
    }
    out.push('\n');
    for (label, cells) in rows {
        let _ = write!(out, "| {label} |");
        for cell in cells {
            match cell {
                Some(v) => {
                    let _ = write!(out, " {v:.digits$} |");
                }
                None => out.push_str(" — |"),
            }
        }
        out.push('\n');
    }
    out
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// Why the PNG font could not be registered (kept for every later call).
#[derive(Clone, Debug)]
enum FontFailure {
    Missing,
    Bad(String),
}

/// Registers [`PNG_FONT_FILE`] for PNG text, once per process.
fn png_font() -> Result<(), PlotError> {
    static FONT: OnceLock<Result<(), FontFailure>> = OnceLock::new();
    let path = Path::new(PNG_FONT_FILE);
    match FONT.get_or_init(|| register_font_file(path)) {
        Ok(()) => Ok(()),
        Err(f) => Err(font_error(path, f.clone())),
    }
}

fn register_font_file(path: &Path) -> Result<(), FontFailure> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(FontFailure::Missing),
        Err(e) => return Err(FontFailure::Bad(e.to_string())),
    };
    // The drawing library keeps fonts for the life of the process; this runs once.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    // Bold text (the title) falls back to this face.
    plotters::style::register_font(FAMILY, FontStyle::Normal, bytes)
        .map_err(|_| FontFailure::Bad("not a TrueType or OpenType font".into()))
}

fn font_error(path: &Path, f: FontFailure) -> PlotError {
    match f {
        FontFailure::Missing => PlotError::MissingFont { path: path.to_owned(), package: PNG_FONT_PACKAGE },
        FontFailure::Bad(message) => PlotError::BadFont { path: path.to_owned(), message },
    }
}

/// The drawing library's error while drawing chart `title`.
fn draw_error<E: std::error::Error + Send + Sync>(title: &str, e: DrawingAreaErrorKind<E>) -> PlotError {
    PlotError::Draw { title: title.to_owned(), message: e.to_string() }
}

/// Writes a chart's SVG text to `path`.
fn write_text(path: &Path, svg: &str) -> Result<(), PlotError> {
    std::fs::write(path, svg).map_err(|e| PlotError::Write { path: path.to_owned(), message: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_font_is_one_line_naming_file_and_package() {
        let path = Path::new("/nonexistent/xlat/NoSuchFont.ttf");
        let f = register_font_file(path).unwrap_err();
        let msg = font_error(path, f).to_string();
        assert!(!msg.contains('\n'));
        assert!(msg.contains("/nonexistent/xlat/NoSuchFont.ttf"), "{msg}");
        assert!(msg.contains(PNG_FONT_PACKAGE), "{msg}");
    }

    #[test]
    fn a_file_that_is_not_a_font_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fake.ttf");
        std::fs::write(&path, b"not a font at all").unwrap();
        assert!(matches!(register_font_file(&path), Err(FontFailure::Bad(_))));
    }

    #[test]
    fn steps_are_1_2_5_times_a_power_of_ten_and_cover_the_request() {
        for (raw, want) in [(0.7, 1.0), (1.0, 1.0), (1.3, 2.0), (3.0, 5.0), (6.0, 10.0), (0.031, 0.05), (420.0, 500.0)]
        {
            let got = nice_step(raw);
            assert!((got - want).abs() < 1e-9 * want, "{raw}: {got} != {want}");
        }
    }

    #[test]
    fn long_labels_are_clipped_to_fit() {
        let long = "x".repeat(100);
        let clipped = clip_label(&long, MAX_ROTATED_LABEL, CAT_FONT);
        assert!(clipped.starts_with('x') && clipped.ends_with('x') && clipped.contains('…'));
        assert!(text_width(&clipped, CAT_FONT) <= MAX_ROTATED_LABEL);
        assert_eq!(clip_label("gcc", MAX_ROTATED_LABEL, CAT_FONT), "gcc");
    }

    #[test]
    fn colours_are_distinct() {
        let cs: Vec<_> = (0..40).map(colour).collect();
        for (a, ca) in cs.iter().enumerate() {
            for cb in &cs[a + 1..] {
                assert_ne!(ca, cb, "series {a}");
            }
        }
    }
}
