"""The quarantine table: every row a log kind rejects, every duplicate, every damaged file.

Ingestion (whole logs and live files alike) never drops a row silently: a row that
fails the kind's checks, a row whose text repeats an earlier row exactly, and a file
that cannot be read whole (:class:`~specula.pipelines.log_files.Damage`) each become one
record of :data:`~specula.pipelines.logs.QUARANTINE_COLUMNS`: the file, the line, the
text, the field and the reason. The text keeps bytes that are not UTF-8 as backslash
escapes (``\\xff``), as the NumPy readers do: Spark's text source passes such bytes on
as they are, and a string column holding them does not read back in every Parquet
reader. :func:`describe` is the one-line message a user sees for a record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from specula.pipelines.log_files import Damage
from specula.pipelines.logs import QUARANTINE_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The reason of a duplicate row starts with this.
DUPLICATE = "exact duplicate of"


def mark_duplicates(checked: DataFrame) -> DataFrame:
    """``checked`` with the valid rows whose text equals an earlier row's rejected.

    Earlier is by ``row`` (file by file, line by line); such a row gets field NULL, the
    reason ``"exact duplicate of line N"`` (``"... of line N of FILE"`` for an earlier
    file) and ``duplicate`` true. A sensor log holds one line per reading, so a repeated
    line is a repeated record, not a second reading. Costs one shuffle of the rows.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    first = Window.partitionBy("text").orderBy("row")
    first_file, first_line = F.first("file").over(first), F.first("line").over(first)
    duplicate = F.col("reason").isNull() & (F.row_number().over(first) > 1)
    reason = F.when(F.col("file") == first_file,
                    F.format_string(f"{DUPLICATE} line %d", first_line)).otherwise(
        F.format_string(f"{DUPLICATE} line %d of %s", first_line, first_file))
    return (checked.withColumn("duplicate", duplicate)
            .withColumn("reason", F.when(F.col("duplicate"), reason).otherwise(F.col("reason")))
            .withColumn("field", F.when(F.col("duplicate"), F.lit(None).cast("string"))
                        .otherwise(F.col("field"))))


def quarantined_rows(checked: DataFrame) -> DataFrame:
    """The rejected rows of ``checked`` as quarantine records, the text escaped where it
    is not UTF-8 (a reason that quotes such text shows U+FFFD for its bad bytes, as
    Spark formats it)."""
    from pyspark.sql import functions as F

    # Inline, so that Spark's Python workers unpickle it without importing specula.
    escape = F.udf(lambda raw: None if raw is None else bytes(raw).decode(
        "utf-8", "backslashreplace"), "string")
    text = F.when(F.is_valid_utf8("text"), F.col("text")).otherwise(
        escape(F.col("text").cast("binary")))
    return checked.where("reason IS NOT NULL").select(
        *[text.alias(c) if c == "text" else F.col(c) for c in QUARANTINE_COLUMNS])


def damage_rows(spark: SparkSession, damaged: Sequence[Damage]) -> DataFrame:
    """One quarantine record per damaged file, at the first line that is lost."""
    return spark.createDataFrame(
        [(d.uri, d.lines + 1, None, None, d.reason) for d in damaged],
        "file string, line long, text string, field string, reason string")


def describe(record: Any) -> str:
    """A quarantine record as a line: ``FILE line N, field 'F': REASON``."""
    where = f"{str(record.file).removeprefix('file://')} line {record.line}"
    field = f", field {record.field!r}" if record.field else ""
    return f"{where}{field}: {record.reason}"
