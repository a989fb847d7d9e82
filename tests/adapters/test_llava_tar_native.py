"""Native-shape DRAKE and HFLB records convert with no rejected row.

Each fixture writes records the way the authors' preprocessing scripts do
(snumprlab/fedmosaic, commit b4ad734, ``preprocess/`` and ``preprocess_feddat/``): the id
rule, the image field, the way the options are written and the answer form. The cases are the
ones that used to lose rows: COMICS' lettered ``A: text| B: text`` list, VSR's image-name ids
(several captions per image), IRFL-3's phrases joined by a bare comma, Bongard-OpenWorld's
``Choice List: [..]`` of captions with commas and its twins sharing an id, SEED-Bench-2-2 with
one- and eight-image questions, HFLB COCOQA's row index restarted per worker chunk, AQUA's
painting-name ids and ``str()`` lists, Abstract's missing ids and nested lists, and
VizWiz-Original's prompt without ``<image>``.
"""

import json

import pytest

from drake.adapters import AdapterOptions
from drake.adapters.llava_tar import LlavaTarAdapter, unique_ids
from drake.registry import get_benchmark
from drake.schema import validate_sample
from tests.adapters.test_llava_tar import png, write_tar

DRAKE, HFLB = get_benchmark("drake"), get_benchmark("hflb")


def record(sid, image, human, gpt, **extra):
    out = {} if sid is None else {"id": sid}
    out.update(extra)
    out.update({"image": image, "conversations": [{"from": "human", "value": human},
                                                  {"from": "gpt", "value": gpt}]})
    return out


def comics(k):
    options = ["ut suddenly - ", "for pete ' s sake , what ? ", "ow ! my foot ! ",
               "keep it up boy , we ' re making good time ! "]
    listed = "| ".join(f"{chr(65 + i)}: {o}" for i, o in enumerate(options))
    human = ("Predict the dialogue of the last panel.\n" + "<image>" * 5 +
             f"\nChoice list:[{listed}]. Answer with the option's letter from the given "
             f"choices directly. Your answer is:")
    images = [f"dataset/COMICS_Dialogue/full/images/{k * 5 + i}.jpg" for i in range(5)]
    return record(k, images, human, "ABCD"[k % 4])


def vsr(image, caption, label):
    human = ("For a given image and caption, decide whether the caption describes the spatial "
             f"relationship.\n<image>\nCaption: {caption}\nChoice list:[True, False]. Your "
             f"answer is:")
    return record(image[:-3], [f"dataset/VSR/images/{image}"], human, label)


IRFL3_PHRASES = ["easy come, easy go", "red tape", "over the moon", "as busy as a bee"]


def irfl3(uuid, answer):
    human = ("Which phrase does the image represent?\n<image>\n"
             f'The definition of "red tape" is excessive bureaucracy\n'
             f"Choice list:[{','.join(IRFL3_PHRASES)}]. Your answer is:")
    return record(uuid, [f"dataset/IRFL/images/{uuid}.jpeg"], human, answer)


BONGARD_CAPTIONS = sorted(["A dog, sitting on grass", "Cats sleeping", "People, at a beach",
                           "A red car"])


def bongard1(uid, idx, answer):
    human = ("Positive: <image><image><image>\nNegative: <image><image><image>\nWhich concept "
             f"do the positive images share?\nChoice List: [{', '.join(BONGARD_CAPTIONS)}]")
    images = [f"dataset/Bongard-OpenWorld/images/{uid}_{i}.jpg" for i in range(6)]
    return record(f"{uid}-{idx}", images, human, answer, commonSense="0")


def seed2(i, frames):
    human = ("Answer the following question.\n" + "<image>" * frames +
             "\nWhat happens next?\nA. it rolls\nB. it stops\nC. it jumps\nD. it turns\n"
             "Answer with the option's letter from the given choices directly.")
    folder = "cc3m-image" if frames == 1 else "SEED-Bench-2-image"
    images = [f"dataset/SEED-Bench-2/{folder}/{i}_{f}.jpg" for f in range(frames)]
    return record(i, images, human, "ABCD"[i % 4])


def cocoqa(idx, question, options, answer):
    human = (f"<image>\n{question}\nAnswer the question using the choices from the choice "
             f"list.\nChoice list:{options}. Your answer is: ")
    return record(idx, f"dataset/COCOQA/images/{idx}.jpg", human, answer)


def aqua(painting, question, options, answer):
    human = (f"<image>\n{question}?\nAnswer the question using the choices from the choice "
             f"list.\nChoice list:{options}. Your answer is: ")
    return record(painting, f"dataset/AQUA/images/{painting}", human, answer)


def abstract(image_id, question, candidates, answer):
    human = ("Please respond accurately to the following query. You must choose your answer "
             f"from the Choice List.\n<image>Question: {question}\nChoice list:[{candidates}]."
             "\n Your answer is:")
    image = f"dataset/Abstract/images/abstract_v002_train2015_{image_id:012d}.png"
    return record(None, image, human, answer, question=question, answer=answer,
                  image_id=image_id)


def vizwiz(name, question, options, answer):
    human = (f"{question}\nWhen the provided information is insufficient, respond with "
             "'unanswerable'.\nAnswer the question using the choices from the choice list.\n"
             f"Choice list:[{', '.join(options)}]. Your answer is: ")
    return record(name, [f"dataset/VizWiz-Original/images/train/{name}.jpg"], human, answer)


def _chunked(rows, chunks):
    """COCOQA's writer: each worker chunk numbers its rows from 0."""
    size = -(-len(rows) // chunks)
    return [cocoqa(k % size, *row) for k, row in enumerate(rows)]


CASES = {
    # task id -> (benchmark, dataset folder, train rows, {(sample index): (answer, choices)})
    "COMICS_Dialogue-0": (DRAKE, "COMICS_Dialogue", [comics(k) for k in range(4)],
                          {1: ("B", ["A", "B", "C", "D"])}),
    "VSR-0": (DRAKE, "VSR", [vsr("000000085637.jpg", "The cat is left of the dog.", "True"),
                             vsr("000000085637.jpg", "The dog is on the cat.", "False"),
                             vsr("000000000139.jpg", "The cup is in the sink.", "True")],
              {1: ("False", ["True", "False"])}),
    "IRFL-3": (DRAKE, "IRFL", [irfl3("u0", "red tape"), irfl3("u1", "easy come, easy go"),
                               irfl3("u2", "as busy as a bee")],
               {1: ("easy come, easy go", IRFL3_PHRASES)}),
    "Bongard-OpenWorld-1": (DRAKE, "Bongard-OpenWorld",
                            [bongard1("p7", 0, "A dog, sitting on grass"),
                             bongard1("p7", 1, "People, at a beach"),
                             bongard1("p8", 0, "Cats sleeping")],
                            {0: ("A dog, sitting on grass", None)}),
    "SEED-Bench-2-2": (DRAKE, "SEED-Bench-2", [seed2(3, 1), seed2(7, 8), seed2(8, 8)],
                       {1: ("D", ["A", "B", "C", "D"])}),
    "COCOQA-2": (HFLB, "COCOQA", _chunked([
        ("What is the color of the bus?", ['red', 'blue', 'white', 'green'], "red"),
        ("What is the color of the kite?", ['yellow', 'black', 'pink', 'orange'], "pink"),
        ("What is the color of the plate?", ['white', 'gray', 'brown', 'blue'], "white"),
        ("What is the color of the shirt?", ['green', 'red', 'purple', 'tan'], "purple"),
        ("What is the color of the sky?", ['blue', 'gray', 'white', 'black'], "gray")], 3),
        {3: ("purple", ["green", "red", "purple", "tan"])}),
    "AQUA-0": (HFLB, "AQUA", [
        aqua("19873-portrait.jpg", "Who is standing", ['man', 'woman', 'dog', 'people'], "man"),
        aqua("19873-portrait.jpg", "Who stands by the door", ['woman', 'child', 'horse'],
             "woman"),
        aqua("00012-land.jpg", "What stands on the hill", [['tree', 'house', 'tower']],
             "tower")],
        {2: ("tower", ["tree", "house", "tower"])}),
    "Abstract-3": (HFLB, "Abstract", [
        abstract(11, "Is the man sitting?", "['no', 'yes']", "yes"),
        abstract(11, "Is there a dog?", "['yes', 'no']", "no"),
        abstract(12, "Is it sunny?", "['no', 'yes']", "no")],
        {0: ("yes", ["no", "yes"])}),
    "VizWiz-Original-0": (HFLB, "VizWiz-Original", [
        vizwiz("VizWiz_train_00000001", "What is this?",
               ["soup", "box of pasta, penne", "cereal", "unanswerable"], "box of pasta, penne"),
        vizwiz("VizWiz_train_00000002", "What is in the can?",
               ["beans", "corn", "unanswerable"], "corn")],
        {0: ("box of pasta, penne", ["soup", "box of pasta, penne", "cereal", "unanswerable"])}),
}


def _tar(tmp_path, dataset, rows):
    members = {}
    for r in rows:
        for path in ([r["image"]] if isinstance(r["image"], str) else r["image"]):
            members[path.removeprefix("dataset/")] = png((len(members) % 250, 0, 0))
    for split in ("train", "test"):
        for subset in range(4):
            members[f"{dataset}/{split}/dataset-{subset}.json"] = json.dumps(rows).encode()
    return write_tar(tmp_path / f"{dataset}.tar", members)


@pytest.mark.parametrize("task_id", sorted(CASES))
def test_native_records_convert_with_no_rejected_row(tmp_path, task_id):
    bench, dataset, rows, expected = CASES[task_id]
    _tar(tmp_path, dataset, rows)
    task = bench.task(task_id)
    ad = LlavaTarAdapter(AdapterOptions(source_dir=tmp_path))
    conv = ad.convert(task, "train")
    assert conv.rejected == [], [(r.source_id, r.reason, r.detail) for r in conv.rejected]
    assert conv.counts()["kept"] == len(rows) and conv.reconciles()
    samples = [ad.sample(task, "train", r, i) for i, r in enumerate(conv.kept)]
    for s in samples:
        validate_sample(s)
        assert s["prompt"].count("<image>") == len(s["images"])
        assert s["answer"] in s["choices"]
    assert len({s["id"] for s in samples}) == len(samples)
    for index, (answer, choices) in expected.items():
        assert samples[index]["answer"] == answer
        if choices is not None:
            assert samples[index]["choices"] == choices
    metas = [json.loads(s["meta"]) for s in samples]
    assert [m["source_row"] for m in metas] == list(range(len(rows)))
    assert [m["source_id"] for m in metas] == [None if "id" not in r else str(r["id"])
                                               for r in rows]


def test_repeated_and_missing_ids_are_made_unique_in_file_order():
    rows = [{"id": 5}, {"id": 5}, {}, {"id": "x"}, {"id": 5}, {"id": "row-2"}, "not a record"]
    assert unique_ids(rows) == ["5", "5~2", "row-2~row-2", "x", "5~3", "row-2", "row-6"]


def test_vizwiz_original_gets_its_image_token_in_front():
    bench, dataset, rows, _ = CASES["VizWiz-Original-0"]
    sample = rows[1]["conversations"][0]["value"]
    assert "<image>" not in sample  # the released turn has none
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        _tar(Path(tmp), dataset, rows)
        ad = LlavaTarAdapter(AdapterOptions(source_dir=Path(tmp)))
        task = bench.task("VizWiz-Original-0")
        conv = ad.convert(task, "train")
        got = ad.sample(task, "train", conv.kept[1], 1)
    assert got["prompt"] == "<image>\n" + sample
    assert json.loads(got["meta"])["image_tokens_added"] == 1
