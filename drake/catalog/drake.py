"""DRAKE and HFLB, as released with the public FedMosaic code (scenarios/*.json).

Client order, task order within a client and the model of each client follow the released
scenario files. The paper's Tab. 23 numbers the same clients differently: released client 0 is
Tab. 23 client 1, released 1 is Tab. 23 client 5 (see ``TAB23_CLIENT``).
"""

from __future__ import annotations

from drake.specs import BenchmarkSpec, ClientSpec, ScenarioSpec, TaskSpec

DRAKE_REPO = "SNUMPR/DRAKE"
HFLB_REPO = "SNUMPR/HFLB"

# Hugging Face ids of the FedMosaic LLaVA variants.
LLAMA_1B = "thkim0305/llama3.2_1B_vl"
LLAMA_3B = "thkim0305/llama3.2_3B_vl"
LLAMA_8B = "thkim0305/llama3.1_8B_vl"
QWEN_05B = "thkim0305/qwen2.5_0.5B_vl"
QWEN_15B = "thkim0305/qwen2.5_1.5B_vl"
QWEN_3B = "thkim0305/qwen2.5_3B_vl"

MC = "multiple_choice"
OPEN = "open_ended"

# id, answer type, images (min, max), description. One row per task; clients below.
DRAKE_TASKS: tuple[tuple[str, str, tuple[int, int], str], ...] = (
    ("Fashion200K-0", MC, (3, 3), "Cloth Counting"),
    ("Fashion200K-1", MC, (3, 3), "3 Image Style T/F"),
    ("Fashion200K-2", MC, (4, 4), "4 Image Color T/F"),
    ("FashionIQ-0", MC, (2, 2), "Query-Reference Caption T/F"),
    ("NLVR2-0", MC, (2, 2), "Dual Image Relationship Check"),
    ("NLVR2-1", MC, (2, 2), "Dual Image Relationship Check"),
    ("CIRR-0", MC, (2, 2), "Image Transition Caption T/F"),
    ("VISION-0", MC, (2, 2), "2 Image T/F"),
    ("VISION-1", MC, (4, 4), "4 Image T/F"),
    ("MagicBrush-0", MC, (2, 2), "Image Edit Instruction Direction Check"),
    ("VSR-0", MC, (1, 1), "Spatial Understanding"),
    # scene-understanding questions (1 image) and video questions (8 frames), as the release
    ("SEED-Bench-2-2", MC, (1, 8), "Temporal Understanding"),
    ("IRFL-0", MC, (1, 1), "Figurative Verification T/F"),
    ("IRFL-1", MC, (4, 4), "Image Selection for Idiom"),
    ("IRFL-2", MC, (4, 4), "Image Selection for Metaphor"),
    ("IRFL-3", MC, (1, 1), "Phrase Selection for Image"),
    ("Bongard-OpenWorld-0", MC, (7, 7), "Positive/Negative Concept Query"),
    ("Bongard-OpenWorld-1", MC, (6, 6), "Common Concept Detection"),
    ("Bongard-HOI-0", MC, (7, 7), "Positive/Negative Concept Query"),
    ("Bongard-HOI-1", MC, (6, 6), "Common Action Detection"),
    ("Bongard-HOI-2", MC, (4, 4), "Action Incoherence Recognition"),
    ("COMICS_Dialogue-0", MC, (3, 3), "Dialogue prediction"),
    ("VizWiz-0", MC, (1, 1), "Question-Answer Difference"),
    ("MIT-States-0", MC, (1, 1), "State Recognition"),
    ("Co-Instruct-DB-0", MC, (1, 1), "How/What QA"),
    ("Co-Instruct-DB-1", MC, (1, 1), "Yes/No QA"),
    ("Co-Instruct-DB-2", MC, (2, 2), "2 Image Quality Compare QA"),
    ("Co-Instruct-DB-3", MC, (3, 3), "3 Image Quality Compare QA"),
    ("TQA-0", MC, (1, 1), "Textbook QA"),
    ("dvqa-0", MC, (1, 1), "Bar chart QA"),
    ("SEED-Bench-2-0", MC, (1, 1), "Instance-Level QA"),
    ("SEED-Bench-2-1", MC, (1, 1), "KGQA"),
    ("iconqa-0", MC, (1, 1), "Multi-Choice QA (PreK & Kindergarten)"),
    ("iconqa-1", MC, (1, 1), "Multi-Choice QA (Grade 1 & 2)"),
    ("iconqa-2", OPEN, (1, 1), "Short Answering QA (PreK & Kindergarten)"),
    ("iconqa-3", OPEN, (1, 1), "Short Answering QA (Grade 1 & 2)"),
    ("WCVQA-0", MC, (1, 1), "Dish Name Prediction"),
    ("WCVQA-1", MC, (1, 1), "Contextualized Dish Name Prediction"),
    ("WCVQA-2", MC, (1, 1), "Dish Name Prediction with Adversarial Context"),
    ("WCVQA-3", MC, (1, 1), "Location Prediction"),
)

DRAKE_UNSEEN: tuple[tuple[str, str, tuple[int, int], str, str], ...] = (
    ("RecipeQA_ImageCoherence-0", MC, (4, 4), "Which step image does not fit", "unseen-task"),
    ("RecipeQA_VisualCloze-0", MC, (4, 8), "Which image completes the sequence", "unseen-task"),
    ("Mantis_contrastive_caption-1", MC, (2, 8), "Which image fits the caption", "unseen-task"),
    ("HQ_Edit-0", MC, (2, 2), "Edit direction, multi-attribute", "unseen-task"),
    ("DreamSim-0", MC, (3, 3), "Which image is more similar to the reference", "unseen-domain"),
    ("Mantis_contrastive_caption-0", MC, (2, 8), "Which image fits the caption", "unseen-domain"),
    ("imagecode-0", MC, (4, 10), "Which near-identical image the text describes", "unseen-domain"),
)

# Released client order and task order (DRAKE_hetero_llava_llama_1B_3B.json).
DRAKE_CLIENTS: tuple[tuple[str, ...], ...] = (
    ("Fashion200K-0", "MagicBrush-0", "VISION-0", "FashionIQ-0"),
    ("VSR-0", "VISION-1", "Fashion200K-2", "NLVR2-0"),
    ("SEED-Bench-2-2", "Fashion200K-1", "NLVR2-1", "CIRR-0"),
    ("VizWiz-0", "IRFL-2", "Bongard-HOI-1", "MIT-States-0"),
    ("IRFL-1", "Bongard-OpenWorld-1", "COMICS_Dialogue-0", "IRFL-0"),
    ("Bongard-HOI-2", "Bongard-OpenWorld-0", "IRFL-3", "Bongard-HOI-0"),
    ("WCVQA-0", "iconqa-2", "Co-Instruct-DB-2", "SEED-Bench-2-1"),
    ("TQA-0", "WCVQA-3", "iconqa-1", "Co-Instruct-DB-1"),
    ("Co-Instruct-DB-0", "dvqa-0", "WCVQA-1", "iconqa-3"),
    ("iconqa-0", "Co-Instruct-DB-3", "SEED-Bench-2-0", "WCVQA-2"),
)
# Subgroup of each released client (relation, reasoning, VQA).
DRAKE_SUBGROUP = ("relation",) * 3 + ("reasoning",) * 3 + ("vqa",) * 4
# Released client index -> the paper's Tab. 23 client number (1-based), by matching task sets.
TAB23_CLIENT = (1, 5, 6, 7, 8, 9, 2, 10, 3, 4)

S, L = "small", "large"
_SIZE = (S, S, L, L, L, L, L, L, S, S)  # 1B clients 0, 1, 8, 9 in the released hetero scenario


def _mix(small: str, large: str) -> tuple[str, ...]:
    return tuple(small if s == S else large for s in _SIZE)


DRAKE_MIXES: dict[str, tuple[str, ...]] = {
    "hetero-llama-1b-3b": _mix(LLAMA_1B, LLAMA_3B),
    "hetero-llama-1b-3b-8b": (LLAMA_1B, LLAMA_1B, LLAMA_3B, LLAMA_3B, LLAMA_3B, LLAMA_3B,
                              LLAMA_8B, LLAMA_3B, LLAMA_1B, LLAMA_8B),
    "hetero-llama-1b-3b-qwen-1.5b": (QWEN_15B, LLAMA_1B, QWEN_15B, LLAMA_3B, QWEN_15B, LLAMA_3B,
                                     LLAMA_3B, LLAMA_3B, LLAMA_1B, LLAMA_3B),
    "hetero-qwen-0.5b-1.5b-3b": (QWEN_15B, QWEN_05B, QWEN_3B, QWEN_3B, QWEN_3B, QWEN_15B,
                                 QWEN_15B, QWEN_3B, QWEN_05B, QWEN_3B),
    # the released DRAKE_hetero_llava_llama_3B_qwen_1_5B(_3B) scenarios
    "hetero-llama-3b-qwen-1.5b": (QWEN_15B, QWEN_15B, QWEN_15B, LLAMA_3B, QWEN_15B, LLAMA_3B,
                                  LLAMA_3B, LLAMA_3B, LLAMA_3B, LLAMA_3B),
    "hetero-llama-3b-qwen-1.5b-3b": (QWEN_15B, QWEN_15B, QWEN_15B, QWEN_3B, QWEN_15B, QWEN_3B,
                                     LLAMA_3B, QWEN_3B, LLAMA_3B, LLAMA_3B),
    **{f"homo-{n}": (m,) * 10 for n, m in (
        ("llama-1b", LLAMA_1B), ("llama-3b", LLAMA_3B), ("llama-8b", LLAMA_8B),
        ("qwen-0.5b", QWEN_05B), ("qwen-1.5b", QWEN_15B), ("qwen-3b", QWEN_3B))},
}

# Paper defaults: 4 tasks x 5 rounds = 20 rounds (dynamic); 20 chunks (static).
STREAM_SCENARIOS = (
    ScenarioSpec("dynamic", "by_task", order="dynamic", rounds=20, rounds_per_task=5),
    ScenarioSpec("static", "by_task", order="static", rounds=20),
)

FEDMOSAIC_CITATION = (
    "Seo, Kim, Lee, Choi and Tuytelaars. Co-LoRA: Collaborative Model Personalization on "
    "Heterogeneous Multi-Modal Clients (FedMosaic; introduces DRAKE and HFLB). ICLR 2026. "
    "https://openreview.net/forum?id=0g5Dk4Qfh0"
)

UNSTATED = "unstated in the release; check upstream"
# Source dataset -> (where the released tar's data comes from, licence of that upstream).
# Licences marked "(Hub card)" were read from the upstream Hub dataset card; the others are not
# stated by the DRAKE release and must be checked upstream before redistributing a build.
DRAKE_SOURCES: dict[str, tuple[str, str]] = {
    "Fashion200K": ("DEMON (Fashion200K)", UNSTATED),
    "FashionIQ": ("DEMON (FashionIQ)", UNSTATED),
    "NLVR2": ("DEMON (NLVR2), two halves", UNSTATED),
    "CIRR": ("DEMON (CIRR)", UNSTATED),
    "VISION": ("DEMON (VISION)", UNSTATED),
    "MagicBrush": ("osunlp/MagicBrush", "cc-by-4.0 (Hub card)"),
    "VSR": ("Visual Spatial Reasoning, zero-shot split", UNSTATED),
    "SEED-Bench-2": ("AILab-CVC/SEED-Bench-2", "cc-by-nc-4.0 (Hub card)"),
    "IRFL": ("lampent/IRFL", UNSTATED),
    "Bongard-OpenWorld": ("joyjay/Bongard-OpenWorld",
                          "cc-by-nc-sa-4.0 (Hub card; crawled images, not owned)"),
    "Bongard-HOI": ("Bongard-HOI", UNSTATED),
    "COMICS_Dialogue": ("DEMON (COMICS dialogue)", UNSTATED),
    "VizWiz": ("DEMON (VizWiz)", UNSTATED),
    "MIT-States": ("DEMON (MIT-States)", UNSTATED),
    "Co-Instruct-DB": ("q-future/Co-Instruct-DB", UNSTATED),
    "TQA": ("DEMON (TQA)", UNSTATED),
    "dvqa": ("DVQA", UNSTATED),
    "iconqa": ("IconQA", UNSTATED),
    "WCVQA": ("World Cuisines VQA", UNSTATED),
    "RecipeQA_ImageCoherence": ("DEMON (RecipeQA)", UNSTATED),
    "RecipeQA_VisualCloze": ("DEMON (RecipeQA)", UNSTATED),
    "Mantis_contrastive_caption": ("TIGER-Lab/Mantis-Instruct contrastive_caption",
                                   "apache-2.0 (Hub card; images keep their own terms)"),
    "HQ_Edit": ("HQ-Edit", UNSTATED),
    "DreamSim": ("DreamSim (NIGHTS)", UNSTATED),
    "imagecode": ("TIGER-Lab/Mantis-Instruct imagecode",
                  "apache-2.0 (Hub card; images keep their own terms)"),
    # HFLB: FedDAT's benchmark, re-split by the FedMosaic authors
    "GQA": ("GQA (via FedDAT)", UNSTATED),
    "Abstract": ("VQA Abstract Scenes (via FedDAT)", UNSTATED),
    "SNLI-VE": ("SNLI-VE (via FedDAT)", UNSTATED),
    "COCOQA": ("COCO-QA (via FedDAT)", UNSTATED),
    "NLVR2_feddat": ("NLVR2 (via FedDAT)", UNSTATED),
    "VizWiz-Original": ("VizWiz (via FedDAT)", UNSTATED),
    "AQUA": ("AQUA (via FedDAT)", UNSTATED),
}


# Datasets whose released subset ids do not reliably name the task (see DATASET_CARD.md,
# "Known quirks"): the llava-tar adapter picks, among these candidates, the file whose records
# carry the task's number of images.
AMBIGUOUS_SUBSETS: dict[str, tuple[str, ...]] = {"Bongard-HOI": ("0", "1", "2")}


def _dataset_of(task_id: str) -> str:
    return task_id.rsplit("-", 1)[0]


def _hub_task(repo: str, tid: str, answer_type: str, images: tuple[int, int], desc: str,
              subgroup: str) -> TaskSpec:
    """A task read by the ``llava-tar`` adapter from ``<repo>/<Dataset>.tar``.

    ``source_args``: ``repo``, ``file`` (the tar), ``dataset`` (its top folder), ``subset`` (the
    ``train|test/dataset-<subset>.json`` id) and, for ambiguous ids, ``subset_candidates``.
    HFLB uses the same layout and record form as DRAKE.
    """
    dataset = _dataset_of(tid)
    args = {"repo": repo, "file": f"{dataset}.tar", "dataset": dataset,
            "subset": tid.rsplit("-", 1)[1]}
    if dataset in AMBIGUOUS_SUBSETS and repo == DRAKE_REPO:
        args["subset_candidates"] = list(AMBIGUOUS_SUBSETS[dataset])
    return TaskSpec(
        id=tid,
        source="llava-tar",
        source_args=args,
        subgroup=subgroup,
        answer_type=answer_type,
        metrics=("token_f1",) if answer_type == OPEN else ("accuracy",),
        description=desc,
        num_images=images,
        prompt_template="released LLaVA conversation (human turn with one <image> per image)",
        split_rule="released train/test files",
        caps={"train": 10000, "test": 2000},
        licence=DRAKE_SOURCES[dataset][1],
        citation=DRAKE_SOURCES[dataset][0],
    )


#: The public alignment set of DRAKE and HFLB (FedMosaic §4.2.2 aligns A and B "on a subset of
#: the models' pre-training data"). The public code uses 5,000 shuffled samples of LLaVA-1.5's
#: mix665k, whose images are not on the Hub in one dataset; the suite takes the same number from
#: LLaVA's stage-1 pre-training images (LCS-558K) with their ReCap captions, which the Hub
#: carries with the images: the first of the 26 parquet shards, a seeded subset.
PUBLIC_ALIGN_REPO = "lmms-lab/LLaVA-ReCap-558K"
PUBLIC_ALIGN_ID = "llava-recap-558k-public"


def public_align_task() -> TaskSpec:
    return TaskSpec(
        id=PUBLIC_ALIGN_ID, source="hf-llava-conversations",
        source_args={"repo": PUBLIC_ALIGN_REPO, "id_column": "id",
                     "allow_patterns": ["README.md", "data/train-00000-of-00026.parquet"],
                     "derive_test": {"from": "train", "fraction": 0.01, "seed": 0}},
        subgroup="public", answer_type="captioning", metrics=("bleu",),
        description="public alignment set: LLaVA pre-training images with their ReCap captions",
        prompt_template="released LLaVA conversation (human turn with one <image>)",
        split_rule="the first parquet shard; a seeded 99/1 split of it, 5,000 train rows kept",
        caps={"train": 5000, "test": 200}, licence="see source (LCS-558K image terms)",
        citation="LLaVA (Liu et al. 2023); LLaVA-NeXT ReCap (lmms-lab)")


def drake_benchmark() -> BenchmarkSpec:
    rows = {t[0]: t for t in DRAKE_TASKS}
    group = {tid: DRAKE_SUBGROUP[c] for c, tasks in enumerate(DRAKE_CLIENTS) for tid in tasks}
    tasks = [_hub_task(DRAKE_REPO, tid, at, im, d, group[tid]) for tid, at, im, d in DRAKE_TASKS]
    tasks += [_hub_task(DRAKE_REPO, tid, at, im, d, g) for tid, at, im, d, g in DRAKE_UNSEEN]
    tasks.append(public_align_task())
    assert set(rows) == set(group), "every DRAKE task belongs to exactly one client"
    return BenchmarkSpec(
        name="drake",
        version="1.0",
        description="DRAKE: 40 client tasks from 19 multi-modal datasets, 10 clients x 4 tasks, "
        "plus 7 unseen tasks",
        protocol="self_others",
        tasks=tuple(tasks),
        clients=tuple(ClientSpec(i, t) for i, t in enumerate(DRAKE_CLIENTS)),
        unseen_tasks=tuple(t[0] for t in DRAKE_UNSEEN),
        public_tasks=(PUBLIC_ALIGN_ID,),
        model_mixes=DRAKE_MIXES,
        default_mix="hetero-llama-1b-3b",
        scenarios=STREAM_SCENARIOS,
        source_note=f"Hugging Face dataset repo {DRAKE_REPO}, one tar per source dataset",
        citation=FEDMOSAIC_CITATION,
    )


HFLB_CLIENTS: tuple[tuple[str, ...], ...] = (
    ("GQA-10", "GQA-11", "GQA-12", "GQA-13"),
    ("GQA-20", "GQA-21", "GQA-22", "GQA-23"),
    ("GQA-30", "GQA-31", "GQA-32", "GQA-33"),
    ("Abstract-0", "Abstract-1", "Abstract-2", "Abstract-3"),
    ("SNLI-VE-0", "SNLI-VE-1", "SNLI-VE-2", "SNLI-VE-3"),
    ("COCOQA-0", "COCOQA-1", "COCOQA-2", "COCOQA-3"),
    ("NLVR2_feddat-0", "NLVR2_feddat-1", "NLVR2_feddat-2", "NLVR2_feddat-3"),
    ("VizWiz-Original-0", "VizWiz-Original-1", "VizWiz-Original-2", "VizWiz-Original-3"),
    ("AQUA-0", "AQUA-1", "AQUA-2", "AQUA-3"),
)
HFLB_DESCRIPTIONS = {
    "GQA-10": "Four-choice - Attribute", "GQA-11": "Four-choice - Relation",
    "GQA-12": "Four-choice - Object", "GQA-13": "Four-choice - Global",
    "GQA-20": "Two-choice - Attribute", "GQA-21": "Two-choice - Relation",
    "GQA-22": "Two-choice - Category", "GQA-23": "Two-choice - Global",
    "GQA-30": "Yes/No - Attribute", "GQA-31": "Yes/No - Relation",
    "GQA-32": "Yes/No - Category", "GQA-33": "Yes/No - Global",
    "Abstract-0": "Attribute", "Abstract-1": "Number", "Abstract-2": "Others",
    "Abstract-3": "Yes/No",
    "SNLI-VE-0": "Action", "SNLI-VE-1": "Scene Context & Object Relations",
    "SNLI-VE-2": "Object-Centric", "SNLI-VE-3": "Commonsense",
    "COCOQA-0": "Object", "COCOQA-1": "Number", "COCOQA-2": "Color", "COCOQA-3": "Location",
    "NLVR2_feddat-0": "Presupposition Negation Universal", "NLVR2_feddat-1": "Spatial Comparative",
    "NLVR2_feddat-2": "Cardinality Existential", "NLVR2_feddat-3": "Coordination Coreference",
    "VizWiz-Original-0": "General Object Identification",
    "VizWiz-Original-1": "Food, Brand, and Label Identification",
    "VizWiz-Original-2": "Color and Type Identification",
    "VizWiz-Original-3": "Optical Character Recognition",
    "AQUA-0": "'standing' keyword", "AQUA-1": "'sitting' keyword",
    "AQUA-2": "'wear', 'hold', 'walk', 'talk' keywords", "AQUA-3": "Other keywords",
}
_HFLB_SIZE = (S, S, L, L, L, S, L, L, L)  # released HFLB_hetero_llava_llama_1B_3B


def hflb_benchmark() -> BenchmarkSpec:
    tasks = []
    for tasks_of_client in HFLB_CLIENTS:
        for tid in tasks_of_client:
            images = (2, 2) if tid.startswith("NLVR2") else (1, 1)
            tasks.append(_hub_task(HFLB_REPO, tid, MC, images, HFLB_DESCRIPTIONS[tid], "hflb"))
    tasks.append(public_align_task())
    mixes = {
        "hetero-llama-1b-3b": tuple(LLAMA_1B if s == S else LLAMA_3B for s in _HFLB_SIZE),
        "homo-llama-1b": (LLAMA_1B,) * 9,
        "homo-llama-3b": (LLAMA_3B,) * 9,
    }
    return BenchmarkSpec(
        name="hflb",
        version="1.0",
        description="HFLB: FedDAT's benchmark re-split, 9 clients x 4 multiple-choice tasks",
        protocol="self_others",
        tasks=tuple(tasks),
        clients=tuple(ClientSpec(i, t) for i, t in enumerate(HFLB_CLIENTS)),
        public_tasks=(PUBLIC_ALIGN_ID,),
        model_mixes=mixes,
        default_mix="hetero-llama-1b-3b",
        scenarios=STREAM_SCENARIOS,
        source_note=f"Hugging Face dataset repo {HFLB_REPO}",
        citation=FEDMOSAIC_CITATION,
    )
