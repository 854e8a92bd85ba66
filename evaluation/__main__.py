"""`make eval` → ``python -m evaluation``: the question set (``evaluation/questions.yaml``) through
the chat engine as the ``demo`` user, once per chat model of the allow-list, on a throwaway database
(``achilles_eval``) with the demo data loaded: the corpus, the hub's project AURORA and the
Confluence space KB. A running ``make run`` is not touched (its own database, cache namespace and
queues). Prints a table per model and ends with ``RESULT {json}``.

    make eval                                   # the builtin model (and LLM_BASE_URL's, when set)
    LLM_BASE_URL=http://127.0.0.1:11434/v1 LLM_MODEL=qwen2.5:7b-instruct make eval
    EVAL_MODELS=builtin-extractive make eval    # only these models of the allow-list (comma-separated)
    EVAL_QUESTIONS=vacation-days,aurora-9001 make eval
    EVAL_VERBOSE=1 make eval                    # every answer, not only the wrong ones
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DB_NAME = "achilles_eval"


def _environment() -> None:
    """The throwaway database and a namespace of its own, before Django reads its settings."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "achilles.settings")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from achilles.bootstrap import bootstrap  # noqa: PLC0415 — reads the environment set above

    bootstrap()  # starts/joins the embedded PostgreSQL and Redis and exports their URLs
    os.environ.update(
        {"ACHILLES_DB_NAME": DB_NAME, "ACHILLES_TESTING": "1", "TEST_DATABASE_NAME": "eval", "ACHILLES_ENV": "dev"}
    )
    # One user asks the whole set within a minute, once per model: the per-user rate of withheld
    # hints (30 an hour, against sweeps) would drop the hints of the last questions it asks.
    os.environ.setdefault("WITHHELD_HINTS_PER_HOUR", "100000")


def _fresh_database() -> None:
    import psycopg  # noqa: PLC0415

    from achilles.bootstrap import database_settings  # noqa: PLC0415

    db = database_settings(os.environ["DATABASE_URL"])
    with psycopg.connect(
        host=db["HOST"] or None,
        port=db.get("PORT") or None,
        user=db["USER"],
        password=db.get("PASSWORD") or None,
        dbname="postgres",
        autocommit=True,
    ) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def main() -> int:
    _environment()
    _fresh_database()
    import django  # noqa: PLC0415

    django.setup()
    from django.core.management import call_command  # noqa: PLC0415

    from achilles.models import User  # noqa: PLC0415
    from evaluation.runner import (  # noqa: PLC0415
        cache_namespace_clear,
        chat_models,
        default_model_set,
        demo_load,
        questions_load,
        run_questions,
    )
    from evaluation.scoring import card_holds, figures, judge  # noqa: PLC0415

    started = time.monotonic()
    print(
        f"eval: a fresh database {DB_NAME}, migrations and the demo data (corpus, AURORA, Confluence KB)…", flush=True
    )
    call_command("migrate", "--noinput", verbosity=0)
    cache_namespace_clear()
    with open(os.devnull, "w") as quiet:
        demo_load(stdout=quiet)
    ids = [i.strip() for i in os.environ.get("EVAL_QUESTIONS", "").split(",") if i.strip()] or None
    questions = questions_load(ids=ids)
    wanted = {m.strip() for m in os.environ.get("EVAL_MODELS", "").split(",") if m.strip()}
    models = [m for m in chat_models() if not wanted or m.name in wanted]
    verbose = os.environ.get("EVAL_VERBOSE") == "1"
    user = User.objects.get(username="demo")
    print(
        f"eval: {len(questions)} questions × {len(models)} model(s), as `demo`; ready in {time.monotonic() - started:.0f}s"
    )
    result: dict = {"eval": "chat", "questions": len(questions), "models": {}}
    for model in models:
        default_model_set(model)
        model_started = time.monotonic()
        verdicts = [judge(q, o) for q, o in run_questions(user, questions)]
        score = figures(verdicts)
        print(f"\n=== {model.name} ({model.provider}), {time.monotonic() - model_started:.0f}s")
        for v in verdicts:
            imprecise = v.precise_cards < v.cards
            if verbose or not v.correct or imprecise:
                mark = "ok " if v.correct else "BAD"
                cited = ", ".join(c.title for c in v.outcome.cards)
                print(f"  {mark} {v.question.id} [{v.question.kind}] {v.question.question}")
                print(f"      → {_short(v.outcome.text)}" + (f"  (cited: {_short(cited, 80)})" if cited else ""))
                if imprecise:
                    stray = ", ".join(
                        f"{c.title} {list(c.markers)}" for c in v.outcome.cards if not card_holds(v.question, c)
                    )
                    print(f"      cards without an expected fact: {_short(stray, 120)}")
                if v.outcome.error:
                    print(f"      error: {v.outcome.error}")
        rows = [
            ("answer correctness (expected facts present)", score.correctness, "≥ 0.8"),
            ("citation precision (cited cards hold the fact)", score.citation_precision, "≥ 0.95"),
            ("refusal precision", score.refusal_precision, "≥ 0.95"),
            ("refusal recall", score.refusal_recall, "≥ 0.95"),
            ("withheld hint shown, nothing leaked", score.withheld_hint, ""),
        ]
        for label, value, target in rows:
            print(f"  {label:<50} {_fmt(value):>6}   {target}")
        p50 = score.first_sentence_p50_ms
        print(f"  {'time to the first sentence, p50':<50} {('—' if p50 is None else f'{p50:.0f} ms'):>6}")
        if score.errors:
            print(f"  errors: {score.errors}")
        result["models"][model.name] = {"provider": model.provider, **score.as_dict()}
    print(f"\neval: {time.monotonic() - started:.0f}s in all")
    print("RESULT " + json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
