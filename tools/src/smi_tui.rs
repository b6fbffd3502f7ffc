//! `am smi --watch`: the table redrawn in the terminal (ratatui on crossterm) until `q`,
//! Esc or Ctrl-C, or `--count` samples.

use std::time::{Duration, Instant};

use anyhow::Context;

use ratatui::crossterm::event::{self, Event, KeyCode, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};

use crate::smi::{COLUMNS, SmiReport, cells};

/// Redraw the reports `sample` gives every `period` until the user quits.
pub fn watch(
    sample: impl Fn() -> Vec<SmiReport>,
    period: Duration,
    count: Option<u64>,
) -> anyhow::Result<()> {
    let mut terminal = ratatui::try_init().context(
        "--watch draws on the terminal, which cannot be opened here: add --json or --csv, or \
         redirect stdout, for one record or table per sample",
    )?;
    let result = (|| -> anyhow::Result<()> {
        let mut n = 0u64;
        loop {
            let reports = sample();
            n += 1;
            terminal.draw(|f| {
                let [top, bottom] =
                    Layout::vertical([Constraint::Min(3), Constraint::Length(3)]).areas(f.area());
                let rows: Vec<Row> = reports
                    .iter()
                    .enumerate()
                    .map(|(i, r)| Row::new(cells(i, r)))
                    .collect();
                let widths: Vec<Constraint> = COLUMNS
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let w = rows_width(&reports, i).max(c.len());
                        Constraint::Length(w as u16)
                    })
                    .collect();
                let table = Table::new(rows, widths)
                    .header(Row::new(COLUMNS).style(Style::new().add_modifier(Modifier::BOLD)))
                    .block(Block::default().borders(Borders::ALL).title(" am smi "));
                f.render_widget(table, top);
                let notes: Vec<String> = reports
                    .iter()
                    .flat_map(|r| r.notes.iter().map(move |x| format!("{}: {x}", r.device)))
                    .collect();
                let footer = format!(
                    "sample {n}, every {:.1} s; q to quit. {}",
                    period.as_secs_f64(),
                    notes.first().cloned().unwrap_or_default()
                );
                f.render_widget(
                    Paragraph::new(footer).block(Block::default().borders(Borders::TOP)),
                    bottom,
                );
            })?;
            if count.is_some_and(|c| n >= c) {
                return Ok(());
            }
            let until = Instant::now() + period;
            while let Some(left) = until.checked_duration_since(Instant::now()) {
                if event::poll(left)?
                    && let Event::Key(k) = event::read()?
                {
                    let ctrl_c =
                        k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                    if ctrl_c || matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) {
                        return Ok(());
                    }
                }
            }
        }
    })();
    ratatui::restore();
    result
}

fn rows_width(reports: &[SmiReport], col: usize) -> usize {
    reports
        .iter()
        .enumerate()
        .map(|(i, r)| cells(i, r).get(col).map_or(0, String::len))
        .max()
        .unwrap_or(0)
}
