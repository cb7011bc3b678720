//! The CLI's text tables: a header and rows in columns two spaces apart, without borders, laid
//! out by comfy-table (widths by display width, so names with wide characters still line up).
//! `--output json` never goes through here.

use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, Table, presets};

/// The lines of a table of `header` and `rows`, each line starting with `indent`; the last
/// column is not padded and no line ends in spaces.
pub fn lines<const N: usize>(
    indent: &str,
    header: [&str; N],
    rows: impl IntoIterator<Item = [String; N]>,
) -> Vec<String> {
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        // Never wrap: a terminal's width must not change what a script greps.
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header);
    for row in rows {
        table.add_row(row);
    }
    for column in table.column_iter_mut() {
        column.set_padding((0, 2));
        column.set_cell_alignment(CellAlignment::Left);
        column.set_constraint(ColumnConstraint::ContentWidth);
    }
    table
        .lines()
        .map(|line| format!("{indent}{}", line.trim_end()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_two_spaces_apart_and_lines_end_without_padding() {
        let rows = [
            ["web-abcde".to_owned(), "Ready".to_owned(), "-".to_owned()],
            [
                "w".to_owned(),
                "NotReady".to_owned(),
                "evicting 3 pods".to_owned(),
            ],
        ];
        assert_eq!(
            lines("  ", ["NAME", "HEALTH", "ACTIVITY"], rows),
            [
                "  NAME       HEALTH    ACTIVITY",
                "  web-abcde  Ready     -",
                "  w          NotReady  evicting 3 pods",
            ]
        );
    }

    #[test]
    fn a_table_without_rows_is_its_header() {
        assert_eq!(lines("", ["KIND", "NAME"], []), ["KIND  NAME"]);
    }

    #[test]
    fn wide_characters_count_by_display_width() {
        let rows = [
            ["日本".to_owned(), "x".to_owned()],
            ["ab".to_owned(), "y".to_owned()],
        ];
        assert_eq!(
            lines("", ["N", "V"], rows),
            ["N     V", "日本  x", "ab    y"]
        );
    }
}
