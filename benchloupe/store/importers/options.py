"""The options of ``import`` as data: each parser keyword an importer takes, with its help text and the
workbench's field label. The CLI makes flags of them (``model_col`` -> ``--model-col``) and the import dialog
fields; which apply to a format is read off its parser's signature (``jobs.imports.format_options``). Plain
data, so ``benchloupe --help`` loads nothing else."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ImportOption:
    """One option of ``import``: ``name`` is the parser keyword (``model_col``; the CLI flag is ``--model-col``),
    ``label`` the workbench's field label, ``kind`` "text", "number" or "flag" (a yes/no switch)."""

    name: str
    label: str
    help: str
    kind: str = "text"


# Every option the importers take, in the order the CLI lists them and the import dialog shows them. Which apply
# to a format is read off its parser's keywords (format_options), so the two cannot drift apart.
OPTIONS: list[ImportOption] = [
    ImportOption("model_col", "model column", "model column name"),
    ImportOption("item_col", "item column", "item column name"),
    ImportOption("correct_col", "0/1 column", "0/1 column name"),
    ImportOption("successes_col", "successes column", "successes column"),
    ImportOption("trials_col", "trials column", "trials column"),
    ImportOption("text_col", "text column", "item text column"),
    ImportOption("answer_col", "answer column", "answer column"),
    ImportOption("group_col", "group column", "item group column"),
    ImportOption("kind_col", "kind column", "item kind column"),
    ImportOption("chance_col", "chance column", "multiple-choice chance column"),
    ImportOption("key_col", "key column", "item key column (metadata files)"),
    ImportOption("reward_col", "reward column", "reward column"),
    ImportOption("reward_model", "reward model", "reward-model name for arena rewards"),
    ImportOption("reward_model_col", "reward-model column", "reward-model column"),
    ImportOption("family_col", "family column", "model family column"),
    ImportOption("owner_col", "owner column", "model owner column"),
    ImportOption("models_file", "models file", "CSV with name, family, owner (and arch) per model"),
    ImportOption("model", "model", "model name (lm-eval / Inspect logs: one model per file)"),
    ImportOption("metric", "metric", "metric field to score (lm-eval) or scorer (Inspect)"),
    ImportOption("exclude_models", "exclude models", "regular expression of models to leave out"),
    ImportOption("prompt_col", "prompt column", "prompt column (arena rewards, preferences)"),
    ImportOption("model_a_col", "model A column", "first model column (preferences)"),
    ImportOption("model_b_col", "model B column", "second model column (preferences)"),
    ImportOption("winner_col", "winner column", "winner column: a / b / tie or a model name (preferences)"),
    ImportOption("probability_col", "probability column", "P(model_a wins) column (preferences)"),
    ImportOption("freq_col", "frequency columns", "pattern frequency column(s), comma-separated (classic pattern tables)"),
    ImportOption("na_values", "missing values", "extra cell values meaning missing, comma-separated (wide)"),
    ImportOption("options", "chosen options", "wide: cells are the chosen option labels (e.g. 1-5 or A-D), scored "
                 "with each item's answer from `import items`; the options are kept so a fixed key re-scores them",
                 "flag"),
    ImportOption("option_col", "option column", "long: the chosen option label column, scored with each item's "
                 "answer (from the answer column or `import items`)"),
    ImportOption("key_prefix", "key prefix", "DualEval keys: 'tag' reproduces the reference's tag::key"),
    ImportOption("filter_name", "filter", "lm-eval filter of a generation task (e.g. strict-match, "
                 "flexible-extract; default: the first the file logs, named in the summary)"),
    ImportOption("reruns", "re-runs", "lm-eval: several runs of one task for one model: newest (the latest run "
                 "wins, a note names the files it supersedes; default) or trials (every run is a repeated trial; "
                 "their settings must agree)"),
    ImportOption("threshold", "threshold", "score at or above which a cell is correct", "number"),
    ImportOption("partial", "partial scores", "Inspect 'P' scores: incorrect | correct | error"),
    ImportOption("scorer", "scorer", "Inspect scorer name"),
    ImportOption("score_key", "score key", "Inspect score key inside a dict value"),
    ImportOption("item_key", "item key", "item key field (Inspect: sample field, default id; lm-eval: row field such "
                 "as doc.id, default the document's own id, else doc_id)"),
    ImportOption("judge_col", "judge column", "judge column (Chatbot Arena battles; default judge)"),
    ImportOption("require_status_ok", "status ok only", "DualEval: keep only rows whose status is ok "
                 "(item_informativeness.py)", "flag"),
    ImportOption("no_model_col", "no model column", "wide: every column is an item; rows are respondents "
                 "<file>/person_0001 ...", "flag"),
]
OPTION_NAMES = [o.name for o in OPTIONS]
