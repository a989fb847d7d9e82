"""The classification and generation benchmarks of pFedMMA, TAP and FediLoRA.

Each is declared with its Hub source, protocol and default scenarios. ``source_args`` is what the
source adapter (``drake.adapters``) reads: columns, class lists and CoOp's renames, prompt
templates, and the split rule where a source has no official test split. The offline stand-ins
are ``synth-cls`` (classification protocols) and ``synth-caption`` (generation).
"""

from __future__ import annotations

from drake.specs import BenchmarkSpec, ScenarioSpec, TaskSpec

# pFedMMA's DomainNet subset (FedBN's 10 classes) and Office-Caltech10 classes.
DOMAINNET_CLASSES = ("bird", "feather", "headphones", "ice_cream", "teapot", "tiger", "whale",
                     "windmill", "wine_glass", "zebra")
DOMAINNET_DOMAINS = ("clipart", "infograph", "painting", "quickdraw", "real", "sketch")
OFFICE_CLASSES = ("back_pack", "bike", "calculator", "headphones", "keyboard", "laptop_computer",
                  "monitor", "mouse", "mug", "projector")
OFFICE_DOMAINS = ("amazon", "caltech", "dslr", "webcam")

# CLIP base/novel datasets: Hub id, number of classes, CoOp zero-shot template.
CLIP_DATASETS: dict[str, tuple[str, int, str]] = {
    "oxford_pets": ("timm/oxford-iiit-pet", 37, "a photo of a {}, a type of pet."),
    "flowers102": ("Donghyun99/Oxford-Flower-102", 102, "a photo of a {}, a type of flower."),
    "dtd": ("tanganke/dtd", 47, "{} texture."),
    "caltech101": ("flwrlabs/caltech101", 100, "a photo of a {}."),
    "food101": ("ethz/food101", 101, "a photo of {}, a type of food."),
    "sun397": ("tanganke/sun397", 397, "a photo of a {}."),
    "ucf101": ("local folder of UCF-101 mid-frames (--source-dir)", 101,
               "a photo of a person doing {}."),
}
PFEDMMA_TEMPLATE = "a photo of a {}."

# How each CLIP source becomes train/test, and CoOp's class-name fixes. Where a source has no
# official test split the rule is seeded and stratified (drake.adapters.hubdata.derived_rows).
CLIP_SOURCE_ARGS: dict[str, dict] = {
    "oxford_pets": {"lowercase": True},  # CoOp lower-cases the breed names
    "food101": {"splits": {"train": "train", "test": "validation"}},  # Food-101's test set
    "caltech101": {
        "exclude_classes": ["background_google", "faces_easy"],  # CoOp drops both
        "rename": {"airplanes": "airplane", "faces": "face", "leopards": "leopard",
                   "motorbikes": "motorbike"},
        "derive_test": {"from": "train", "fraction": 0.3, "seed": 1, "stratify": True},
    },
    "ucf101": {"image_dir": "UCF-101-midframes", "split_file": "split_zhou_UCF101.json",
               "test_fraction": 0.3, "split_seed": 1},
}
CLIP_SPLIT_RULES: dict[str, str] = {
    "food101": "official: test = the Hub 'validation' split (Food-101's 25,250 test images)",
    "caltech101": "train-only source: seeded (1) stratified 70/30 split per class",
    "ucf101": "CoOp's split_zhou_UCF101.json train/test when present (val unused), else a "
              "seeded (1) stratified 70/30 split per class",
}
PFEDMMA_CITATION = "pFedMMA: personalized federated fine-tuning with multi-modal adapters"
TAP_CITATION = "TAP: task-aware personalization of multi-modal foundation models in FL"
FEDILORA_CITATION = "FediLoRA: heterogeneous LoRA for federated multimodal fine-tuning"


def _cls_task(tid: str, hub: str, desc: str, licence: str, citation: str, **args) -> TaskSpec:
    return TaskSpec(
        id=tid, source="hf-classification", source_args={"repo": hub, **args},
        subgroup="classification", answer_type="classification", metrics=("accuracy",),
        description=desc, num_images=(1, 1), prompt_template="<image>", licence=licence,
        citation=citation,
    )


#: pFedMMA's Dirichlet concentrations for CIFAR (its Tab. 2)
CIFAR_BETAS = (0.1, 0.3, 0.5, 1, 5, 10)


#: pFedMMA's Tabs. 11/12: one or two clients per domain over its beta set (Tab. 3's (2, 0.5)
#: is declared first by each benchmark)
PFEDMMA_DOMAIN_SWEEP = tuple((k, beta) for k in (1, 2) for beta in CIFAR_BETAS
                             if (k, beta) != (2, 0.5))


def _by_domain(*settings: tuple[int, float]) -> tuple[ScenarioSpec, ...]:
    """Per-domain Dirichlet label splits named as the leaderboard names them,
    ``dir-alpha<beta>-<k>clients-per-domain``, one per (clients per domain, beta)."""
    return tuple(ScenarioSpec(f"dir-alpha{beta:g}-{k}client{'s' if k > 1 else ''}-per-domain",
                              "by_domain",
                              params={"clients_per_domain": k, "alpha": beta, "min_size": 2,
                                      "paired_test": True, "test_min_size": 2})
                 for k, beta in settings)


def domainnet_benchmark() -> BenchmarkSpec:
    return BenchmarkSpec(
        name="domainnet", version="1.0",
        description="DomainNet, 6 domains x FedBN's 10 classes; clients per domain (pFedMMA)",
        protocol="classification",
        tasks=(_cls_task("domainnet", "wltjr1007/DomainNet", "10-class DomainNet subset",
                         "research only (DomainNet terms)", "Peng et al. 2019",
                         classes=list(DOMAINNET_CLASSES), domains=list(DOMAINNET_DOMAINS),
                         template=PFEDMMA_TEMPLATE),),
        # the paper's Tab. 3 (2 clients per domain, beta 0.5), its code's script (5 per
        # domain, beta 0.3), and the beta sweep of its Tabs. 11/12 at one and two per domain
        scenarios=_by_domain((2, 0.5), (5, 0.3), *PFEDMMA_DOMAIN_SWEEP),
        source_note="wltjr1007/DomainNet filtered to 6 domains x 10 FedBN classes",
        citation=PFEDMMA_CITATION,
    )


def office_benchmark() -> BenchmarkSpec:
    return BenchmarkSpec(
        name="office-caltech10", version="1.0",
        description="Office-Caltech10, 4 domains x 10 classes; clients per domain (pFedMMA)",
        protocol="classification",
        tasks=(TaskSpec(
            id="office-caltech10", source="fedbn-folder",
            source_args={"classes": list(OFFICE_CLASSES), "domains": list(OFFICE_DOMAINS),
                         "test_fraction": 0.2, "split_seed": 0, "template": PFEDMMA_TEMPLATE},
            subgroup="classification", answer_type="classification", metrics=("accuracy",),
            description="Office-Caltech10 in FedBN's layout, from a local folder (--source-dir)",
            prompt_template="<image>", licence="research only", citation="Gong et al. 2012",
            split_rule="seeded (0) stratified 80/20 split per (domain, class); FedBN's pickled "
                       "split lists are not read"),),
        # the paper's Tab. 3 (2 clients per domain, beta 0.5), its code's script (3 per
        # domain, beta 0.3), and the beta sweep of its Tabs. 11/12 at one and two per domain
        scenarios=_by_domain((2, 0.5), (3, 0.3), *PFEDMMA_DOMAIN_SWEEP),
        source_note="not on the Hub: FedBN's Office-Caltech10 folder, given with --source-dir",
        citation=PFEDMMA_CITATION,
    )


def clip_benchmarks() -> list[BenchmarkSpec]:
    out = []
    for name, (hub, n_cls, template) in CLIP_DATASETS.items():
        source = "local-image-folder" if name == "ucf101" else "hf-classification"
        split = CLIP_SPLIT_RULES.get(name, "official train/test")
        task = TaskSpec(
            id=name, source=source,
            # pFedMMA prompts every dataset with "a photo of a {}."; CoOp's per-dataset template
            # is kept for zero-shot CLIP's CoOp-template row
            source_args={"repo": hub, "num_classes": n_cls, "coop_template": template,
                         **CLIP_SOURCE_ARGS.get(name, {})},
            subgroup="classification", answer_type="classification", metrics=("accuracy",),
            description=f"{name}: {n_cls} classes, base = first ceil(n/2) sorted classes",
            prompt_template=PFEDMMA_TEMPLATE,
            split_rule=f"{split}; base/novel: sorted classes, base = first half",
            licence="see source", citation=name)
        out.append(BenchmarkSpec(
            name=f"clip-base2novel/{name}", version="1.0",
            description=f"CLIP base-to-novel on {name}, 10 clients with disjoint base classes",
            protocol="base_novel", tasks=(task,),
            # pFedMMA's base-to-novel split: base classes over 10 clients in contiguous
            # blocks (Python shuffle, seed 2023), k shots per owned class (Tab. 9's k)
            scenarios=tuple(ScenarioSpec(f"pathological-{k}shot", "pathological",
                                         params={"mode": "contiguous", "num_clients": 10,
                                                 "seed": 2023, "base_only": True, "shots": k})
                            for k in (16, 8, 4, 2, 1)),
            source_note=hub, citation=PFEDMMA_CITATION))
    return out


def cifar_benchmarks() -> list[BenchmarkSpec]:
    c10 = BenchmarkSpec(
        name="cifar10-dir", version="1.0",
        description="CIFAR-10, Dirichlet label skew over 100 clients (pFedMMA / NIID-Bench rule)",
        protocol="classification",
        tasks=(_cls_task("cifar10", "uoft-cs/cifar10", "CIFAR-10", "MIT", "Krizhevsky 2009",
                         image_column="img", label_column="label", template=PFEDMMA_TEMPLATE),),
        # datasplit.py's noniid-labeldir: test cut with the train proportions, redrawn until
        # every client has 10 of each (its loop has no bound; 100,000 draws here)
        scenarios=tuple(ScenarioSpec(f"dir-alpha{a:g}", "dirichlet",
                                     params={"num_clients": 100, "alpha": a, "min_size": 10,
                                             "paired_test": True, "test_min_size": 10,
                                             "max_retries": 100_000})
                        for a in CIFAR_BETAS),
        source_note="uoft-cs/cifar10", citation=PFEDMMA_CITATION)
    c100 = BenchmarkSpec(
        name="cifar100-dir", version="1.0",
        description="CIFAR-100, hierarchical Dirichlet over 100 clients (pFedMMA's script)",
        protocol="classification",
        tasks=(_cls_task("cifar100", "uoft-cs/cifar100", "CIFAR-100", "MIT", "Krizhevsky 2009",
                         image_column="img", label_column="fine_label",
                         coarse_column="coarse_label", template=PFEDMMA_TEMPLATE),),
        # the script's hierarchical split at each beta of Tab. 2 (beta on the coarse labels),
        # and the flat label-Dirichlet rule for comparison
        scenarios=(*(ScenarioSpec(f"dir-alpha{a:g}", "dirichlet_hierarchical",
                                  params={"num_clients": 100, "alpha_coarse": a,
                                          "alpha_fine": 10.0})
                     for a in CIFAR_BETAS),
                   ScenarioSpec("flat-dir-alpha0.3", "dirichlet",
                                params={"num_clients": 100, "alpha": 0.3, "min_size": 10,
                                        "paired_test": True, "test_min_size": 10,
                                        "max_retries": 100_000})),
        source_note="uoft-cs/cifar100", citation=PFEDMMA_CITATION)
    return [c10, c100]


# TAP's text templates (paper Tab. 23). The response line is the scored target, as in TAP's
# code, so BERTScore/METEOR compare like with like; the bare answer is kept in meta.
TAP_MMLU_PROMPT = ("The following is a multiple-choice question about {subject}. Choose the "
                   "correct answer from the options below.\n\nQuestion: {question}\nOptions:\n"
                   "{options}")
TAP_MMLU_ANSWER = "Correct answer on {subject}: {answer}"
TAP_VQA_PROMPT = "<image>\nAnswer the question based on the image.\n\nQuestion: {question}"
TAP_VQA_ANSWER = "Answer: {answer}"
TAP_COMMONGEN_PROMPT = ("Generate an appropriate description from the concepts below.\n\n"
                        "Concepts: {concepts}")
TAP_COMMONGEN_ANSWER = "Description: {answer}"
AG_NEWS_CLASSES = ("World", "Sports", "Business", "Sci/Tech")  # sh0416/ag_news labels 1..4

# TAP (FLAVA setup): 8 datasets across 30 clients. Each row: id, Hub id, answer type,
# description, metrics, adapter args (``format`` picks the mapping, see drake.adapters.tap).
# FashionMNIST / Caltech-256 are image reconstruction (MSE), answer type "image": each sample
# stores [input, target] (the target the input itself, as TAP reconstructs it) and no answer.
TAP_TASKS: tuple[tuple[str, str, str, str, tuple[str, ...], dict], ...] = (
    ("tiny-imagenet", "zh-plus/tiny-imagenet", "classification", "image classification",
     ("accuracy",), {"format": "image-classification",
                     "splits": {"train": "train", "test": "valid"},
                     "split_rule": "official: train / valid"}),
    ("cifar100", "uoft-cs/cifar100", "classification", "image classification", ("accuracy",),
     {"format": "image-classification", "image_column": "img", "label_column": "fine_label",
      "split_rule": "official: train / test"}),
    ("fashion-mnist", "zalando-datasets/fashion_mnist", "image",
     "image reconstruction (64x64 RGB)", ("mse",),
     {"format": "image-reconstruction", "resize": 64, "split_rule": "official: train / test"}),
    ("caltech256", "ilee0022/Caltech-256", "image", "image reconstruction", ("mse",),
     {"format": "image-reconstruction", "split_rule": "official: train / test"}),
    ("ag-news", "sh0416/ag_news", "classification", "text classification", ("accuracy",),
     {"format": "text-classification", "text": "{title}\n{description}",
      "classes": list(AG_NEWS_CLASSES), "label_offset": 1,
      "split_rule": "official: train / test"}),
    ("mmlu", "cais/mmlu", "open_ended",
     "professional_law, professional_medicine, moral_scenarios as text generation",
     ("bertscore", "meteor"),
     {"format": "mmlu", "prompt": TAP_MMLU_PROMPT, "answer": TAP_MMLU_ANSWER,
      "configs": {"professional_law": "law", "professional_medicine": "medicine",
                  "moral_scenarios": "ethics"},
      "splits": {"train": "test", "test": "validation"},
      "split_rule": "as TAP: MMLU's test split trains, its validation split tests"}),
    ("vqav2-small", "merve/vqav2-small", "open_ended", "VQA as text generation",
     ("bertscore", "meteor"),
     {"format": "vqa", "prompt": TAP_VQA_PROMPT, "answer": TAP_VQA_ANSWER,
      "question_column": "question", "answer_column": "multiple_choice_answer",
      "derive_test": {"from": "validation", "train_count": 17000, "seed": 42},
      "split_rule": "as TAP: the validation split shuffled with seed 42; first 17,000 train, "
                    "the rest test (TAP drew train with seeds 41-44, which overlaps test)"}),
    ("common-gen", "allenai/common_gen", "open_ended", "concepts to a sentence",
     ("bertscore", "meteor"),
     {"format": "commongen", "prompt": TAP_COMMONGEN_PROMPT, "answer": TAP_COMMONGEN_ANSWER,
      "splits": {"train": "train", "test": "validation"},
      "split_rule": "official: train / validation (the test split has no targets)"}),
)
# images per sample (a reconstruction's count includes its stored target)
_TAP_IMAGES = {"image-classification": (1, 1), "image-reconstruction": (2, 2), "vqa": (1, 1)}


def tap_benchmark() -> BenchmarkSpec:
    tasks = []
    for tid, hub, at, desc, metrics, args in TAP_TASKS:
        args = dict(args)
        rule = args.pop("split_rule")
        tasks.append(TaskSpec(
            id=tid, source="hf-tap", source_args={"repo": hub, **args}, subgroup="tap",
            answer_type=at, metrics=metrics, description=desc,
            num_images=_TAP_IMAGES.get(args["format"], (0, 0)), prompt_template=args.get(
                "prompt", ""), split_rule=rule, licence="see source", citation=tid))
    return BenchmarkSpec(
        name="tap", version="1.0",
        description="TAP's multi-task multi-modal setup: 8 datasets (FLAVA) or 6 (ViLT) over "
        "30 clients in 3 groups of 10 with fixed task sets",
        protocol="generation", tasks=tuple(tasks),
        # TAP's FLAVA by default; `--model-mix vilt-b32` for its ViLT (the vilt layout), and
        # the tiny twins of both offline
        model_mixes={"flava-full": ("flava-full",), "vilt-b32": ("vilt-b32",),
                     "tiny-tap": ("tiny-tap",), "tiny-tap-vilt": ("tiny-tap-vilt",)},
        default_mix="flava-full",
        # TAP's code: 3 groups x 10 client patterns; Fashion-MNIST keeps its index order
        scenarios=tuple(ScenarioSpec(f"{backbone}-30", "tap_groups",
                                     params={"layout": backbone, "groups": 3,
                                             "unshuffled": ["fashion-mnist"],
                                             "clients_per_round": 2})
                        for backbone in ("flava", "vilt")),
        source_note="Hub datasets listed per task", citation=TAP_CITATION)


# FediLoRA: id, Hub id, adapter args. ReCap-118K and the NeXt preference set have only a train
# split: a seeded 90/10 split (FediLoRA's seed, 666) makes the global test split.
FEDILORA_SPLIT = {"from": "train", "fraction": 0.1, "seed": 666}
FEDILORA_TASKS: tuple[tuple[str, str, dict], ...] = (
    ("llava-recap-118k", "lmms-lab/LLaVA-ReCap-118K",
     {"id_column": "id", "derive_test": FEDILORA_SPLIT}),
    ("sam-llava-20k", "unography/SAM-LLAVA-20k", {"caption_column": "caption"}),
    ("llava-next-preference-20k", "battleMaster/llava-next-Preference-dataset-20k",
     {"derive_test": FEDILORA_SPLIT}),
)


def fedilora_benchmark() -> BenchmarkSpec:
    tasks = tuple(
        TaskSpec(id=tid, source="hf-llava-conversations", source_args={"repo": hub, **args},
                 subgroup="captioning", answer_type="captioning",
                 metrics=("google_bleu", "rougeLsum"), description=f"{tid}: image to text",
                 normalise="evalai",
                 split_rule="seeded (666) 90/10 train/test split of the Hub train split"
                 if "derive_test" in args else "official: train / test",
                 licence="see source", citation=tid)
        for tid, hub, args in FEDILORA_TASKS
    )
    # the whole dataset (the stored splits pooled) cut into 10 clients of random sizes plus a
    # global test subset; each client's subset split 8:2 into its train and local test rows
    # (FediLoRA §4.1). The stored 90/10 split (its code's) is storage only here.
    split = {"num_clients": 10, "global_test": True, "local_test_fraction": 0.2,
             "pool_test": True}
    scen = [ScenarioSpec("quantity-skew", "quantity_skew", params=dict(split))]
    scen += [ScenarioSpec(f"missing{r}", "quantity_skew",
                          params={**split, "missing_rate": r, "missing_mode": "per_sample"})
             for r in (0.4, 0.6)]
    return BenchmarkSpec(
        name="fedilora", version="1.0",
        description="FediLoRA: 3 image-to-text datasets, 10 clients with random sizes plus a "
        "global test split, heterogeneous LoRA ranks, missing modalities",
        protocol="generation", tasks=tasks, scenarios=tuple(scen),
        source_note="Hub datasets listed per task", citation=FEDILORA_CITATION)
