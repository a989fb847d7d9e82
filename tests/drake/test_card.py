from pathlib import Path

from drake.card import project_card

ROOT = Path(__file__).resolve().parents[2]


def test_dataset_card_is_up_to_date():
    committed = (ROOT / "DATASET_CARD.md").read_text()
    assert committed == project_card(), (
        "DATASET_CARD.md is stale: regenerate it with `python -m drake.card > DATASET_CARD.md`")


def test_card_holds_both_task_tables_and_the_tab23_mapping():
    card = project_card()
    assert card.count("| Fashion200K-0 | relation |") == 1
    assert "| Fashion200K-0 | 160 | 40 |" in card  # the twin row names its real task
    assert "| released client | Tab. 23 client |" in card


def test_project_card_is_a_hub_card_with_real_line_breaks():
    import yaml

    from drake.card import project_card

    text = project_card()
    assert "\\n" not in text, "escaped line breaks leaked into the card"
    assert text.startswith("---\n")
    header, _, body = text[4:].partition("\n---\n")
    meta = yaml.safe_load(header)
    assert meta["license"] == "other" and len(meta["configs"]) >= 48
    assert body.lstrip().startswith("# DRAKE")
