//! A line diff for the edit preview: the operator sees exactly what a save changes.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Same(String),
    Removed(String),
    Added(String),
}

/// Above this many lines per side the LCS table gets large; show the two texts instead.
pub const MAX_DIFF_LINES: usize = 2_000;

/// Longest-common-subsequence line diff. `None` when either side is too long to diff.
pub fn lines(old: &str, new: &str) -> Option<Vec<Line>> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    if a.len() > MAX_DIFF_LINES || b.len() > MAX_DIFF_LINES {
        return None;
    }
    // Trim the common head and tail first: edits are usually small.
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (am, bm) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let (n, m) = (am.len(), bm.len());
    let mut lcs = vec![0u32; (n + 1) * (m + 1)];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i * (m + 1) + j] = if am[i] == bm[j] {
                lcs[(i + 1) * (m + 1) + j + 1] + 1
            } else {
                lcs[(i + 1) * (m + 1) + j].max(lcs[i * (m + 1) + j + 1])
            };
        }
    }
    let mut out: Vec<Line> = a[..head]
        .iter()
        .map(|l| Line::Same(l.to_string()))
        .collect();
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if am[i] == bm[j] {
            out.push(Line::Same(am[i].to_string()));
            i += 1;
            j += 1;
        } else if lcs[(i + 1) * (m + 1) + j] >= lcs[i * (m + 1) + j + 1] {
            out.push(Line::Removed(am[i].to_string()));
            i += 1;
        } else {
            out.push(Line::Added(bm[j].to_string()));
            j += 1;
        }
    }
    out.extend(am[i..].iter().map(|l| Line::Removed(l.to_string())));
    out.extend(bm[j..].iter().map(|l| Line::Added(l.to_string())));
    out.extend(
        a[a.len() - tail..]
            .iter()
            .map(|l| Line::Same(l.to_string())),
    );
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_line_shows_as_removed_then_added() {
        let d = lines(
            "{\n  \"a\": 1,\n  \"b\": 2\n}",
            "{\n  \"a\": 1,\n  \"b\": 3\n}",
        )
        .unwrap();
        assert_eq!(
            d,
            vec![
                Line::Same("{".into()),
                Line::Same("  \"a\": 1,".into()),
                Line::Removed("  \"b\": 2".into()),
                Line::Added("  \"b\": 3".into()),
                Line::Same("}".into()),
            ]
        );
    }

    #[test]
    fn identical_texts_have_no_changes() {
        let d = lines("x\ny", "x\ny").unwrap();
        assert!(d.iter().all(|l| matches!(l, Line::Same(_))));
    }
}
