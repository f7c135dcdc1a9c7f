//! Sending a statement with its parameters, in a form every T-SQL server reads alike.
//!
//! tiberius encodes every NULL parameter with TDS type 0x1F, an untyped NULL. SQL Server accepts
//! it; Babelfish for PostgreSQL refuses the call ("Data type 0x1F is unknown", error 8009). So
//! a NULL parameter travels as a typed NULL literal in the statement text instead
//! (`CAST(NULL AS NVARCHAR(MAX))`, the type its value would have had), and its slot keeps a
//! typed placeholder nothing reads, so the numbering of the other parameters is unchanged.

use std::borrow::Cow;

use futures::io::{AsyncRead, AsyncWrite};
use tiberius::{ColumnData, QueryStream, ToSql};

/// `client.query(sql, params)`, with NULL parameters written into the text (see the module).
pub async fn query<'a, S>(
    client: &'a mut tiberius::Client<S>,
    sql: &str,
    params: &[&dyn ToSql],
) -> tiberius::Result<QueryStream<'a>>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let (sql, slots) = typed_nulls(sql, params);
    let refs: Vec<&dyn ToSql> = slots.iter().map(|s| s as &dyn ToSql).collect();
    client.query(sql.into_owned(), &refs).await
}

/// One parameter as it is sent.
struct Slot<'a>(ColumnData<'a>);

impl ToSql for Slot<'_> {
    fn to_sql(&self) -> ColumnData<'_> {
        self.0.clone()
    }
}

/// The statement with each NULL parameter `@Pn` replaced by a typed NULL literal, and the
/// values to send (a NULL's slot holds a placeholder of the same type).
fn typed_nulls<'s, 'p>(sql: &'s str, params: &'p [&dyn ToSql]) -> (Cow<'s, str>, Vec<Slot<'p>>) {
    let mut text = Cow::Borrowed(sql);
    let mut slots = Vec::with_capacity(params.len());
    for (i, param) in params.iter().enumerate() {
        let value = param.to_sql();
        match null_literal(&value) {
            Some(literal) => {
                text = Cow::Owned(replace_param(&text, i + 1, literal));
                // Nothing reads it any more: any typed value keeps the numbering.
                slots.push(Slot(ColumnData::I32(Some(0))));
            }
            None => slots.push(Slot(value)),
        }
    }
    (text, slots)
}

/// For a NULL value, the literal that replaces it.
fn null_literal(value: &ColumnData<'_>) -> Option<&'static str> {
    use ColumnData as C;
    Some(match value {
        C::U8(None) => "CAST(NULL AS TINYINT)",
        C::I16(None) => "CAST(NULL AS SMALLINT)",
        C::I32(None) => "CAST(NULL AS INT)",
        C::I64(None) => "CAST(NULL AS BIGINT)",
        C::F32(None) => "CAST(NULL AS REAL)",
        C::F64(None) => "CAST(NULL AS FLOAT)",
        C::Bit(None) => "CAST(NULL AS BIT)",
        C::String(None) => "CAST(NULL AS NVARCHAR(MAX))",
        C::Binary(None) => "CAST(NULL AS VARBINARY(MAX))",
        C::Guid(None) => "CAST(NULL AS UNIQUEIDENTIFIER)",
        C::Numeric(None) => "CAST(NULL AS DECIMAL(38, 10))",
        C::Xml(None) => "CAST(NULL AS XML)",
        C::DateTime(None) => "CAST(NULL AS DATETIME)",
        C::SmallDateTime(None) => "CAST(NULL AS SMALLDATETIME)",
        C::Time(None) => "CAST(NULL AS TIME(7))",
        C::Date(None) => "CAST(NULL AS DATE)",
        C::DateTime2(None) => "CAST(NULL AS DATETIME2(7))",
        C::DateTimeOffset(None) => "CAST(NULL AS DATETIMEOFFSET(7))",
        _ => return None,
    })
}

/// Replace every `@P{number}` token (not `@P{number}0`, not `@P{number}_x`) with `literal`.
fn replace_param(sql: &str, number: usize, literal: &str) -> String {
    let token = format!("@P{number}");
    let mut out = String::with_capacity(sql.len() + literal.len());
    let mut rest = sql;
    while let Some(at) = rest.find(&token) {
        let after = &rest[at + token.len()..];
        let whole = !after
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        out.push_str(&rest[..at]);
        out.push_str(if whole { literal } else { &token });
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_parameters_become_typed_literals_and_others_travel_as_given() {
        let name: Option<&str> = None;
        let count: Option<i32> = None;
        let id: &[u8] = &[1, 2, 3];
        let limit = 7_i64;
        let params: [&dyn ToSql; 4] = [&name, &limit, &count, &id];
        let (sql, slots) = typed_nulls(
            "SELECT ISNULL(@P1, N'x'), @P2, @P3, @P1 WHERE id = @P4 AND @P10 = @P1_x;",
            &params,
        );
        assert_eq!(
            sql,
            "SELECT ISNULL(CAST(NULL AS NVARCHAR(MAX)), N'x'), @P2, CAST(NULL AS INT), \
             CAST(NULL AS NVARCHAR(MAX)) WHERE id = @P4 AND @P10 = @P1_x;"
        );
        // Same number of slots, none of them an untyped NULL.
        assert_eq!(slots.len(), 4);
        assert_eq!(slots[1].0, ColumnData::I64(Some(7)));
        assert_eq!(
            slots[3].0,
            ColumnData::Binary(Some(Cow::Borrowed(&[1, 2, 3][..])))
        );
        assert!(slots.iter().all(|s| null_literal(&s.0).is_none()));
    }

    #[test]
    fn without_nulls_the_text_is_not_copied() {
        let a = 1_i32;
        let params: [&dyn ToSql; 1] = [&a];
        let (sql, _) = typed_nulls("SELECT @P1;", &params);
        assert!(matches!(sql, Cow::Borrowed(_)));
    }
}
