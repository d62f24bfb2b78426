# Section 4.2: the NoPE decoder and its RoPE twin, each trained with training.seed (runs nope, rope) and, for target
# length_seeds, with every seed of evaluation.seeds (runs nope_seed1, ...: catalogue.models); their length
# generalisation, the pattern ablation (issue 27) and the extraction at every training snapshot.


rule train:
    input:
        blocks=rules.tokenizer.output.blocks,
        train=rules.tokenizer.output.train,
        heldout=rules.tokenizer.output.heldout,
        tokenizer=rules.tokenizer.output.tokenizer,
    output:
        **snapshots_output(),
        model=paths.model_file("{model}", "model.safetensors", RESULTS),
        config=paths.model_file("{model}", "config.json", RESULTS),
        info=paths.model_file("{model}", "training.json", RESULTS),
        metrics=paths.table_file("metrics", RESULTS, model="{model}"),
    log:
        log_path("train/{model}.log"),
    benchmark:
        paths.train_benchmark("{model}", RESULTS)
    wildcard_constraints:
        model=TRAINED_RUNS,
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("train")
    resources:
        **job_resources("train"),
    params:
        settings=lambda wildcards: settings.training_of(config, wildcards.model),
        processes=config["train_processes"],
        checkpoints=paths.checkpoints_dir(RESULTS),
        # a timing beside the benchmark, not an output: a lost one never reruns the training
        throughput=lambda wildcards: paths.train_throughput(wildcards.model, RESULTS),
        code=code("train"),
        upstream=upstream("train"),
    script:
        "../workflow_scripts/job.py"


rule length_eval:
    input:
        model=rules.train.output.model,
        blocks=rules.tokenizer.output.blocks,
        heldout=rules.tokenizer.output.heldout,
    output:
        paths.table_file("length_eval", RESULTS, model="{model}"),
    log:
        log_path("length_eval/{model}.log"),
    wildcard_constraints:
        model=TRAINED_RUNS,
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("length_eval")
    resources:
        **job_resources("length_eval"),
    params:
        factors=config["evaluation"]["length_factors"],
        max_sequences=config["evaluation"]["length_sequences"],
        device=config["training"]["device"],
        code=code("length_eval"),
        upstream=upstream("length_eval"),
    script:
        "../workflow_scripts/job.py"


# Issue 27: the held-out loss at every length with the model's non-relative pattern taken out, and its controls.
rule pattern_ablation:
    input:
        model=rules.train.output.model,
        blocks=rules.tokenizer.output.blocks,
        heldout=rules.tokenizer.output.heldout,
    output:
        paths.table_file("pattern_ablation", RESULTS, model="{model}"),
    log:
        log_path("pattern_ablation/{model}.log"),
    benchmark:
        paths.ablation_benchmark("{model}", RESULTS)
    wildcard_constraints:
        model=TRAINED_RUNS,
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("pattern_ablation")
    resources:
        **job_resources("pattern_ablation"),
    params:
        factors=config["evaluation"]["length_factors"],
        max_sequences=config["evaluation"]["length_sequences"],
        n_estimate=config["evaluation"]["ablation_sequences"],
        device=config["training"]["device"],
        seed=config["data"]["seed"],
        training_seed=config["training"]["seed"],
        code=code("pattern_ablation"),
        upstream=upstream("pattern_ablation"),
    script:
        "../workflow_scripts/job.py"


# Every model's ablation table in one, and its figure: the default run's models in results/summary, every training
# seed's in results/seeds/summary (target length_seeds).
rule pattern_ablation_summary:
    input:
        tables=ablation_tables,
    output:
        table=paths.table_file("pattern_ablation_summary", "{results}"),
        figures=report_figures(ABLATION_FIGURE),
    log:
        log_path("pattern_ablation_summary.log", "{results}"),
    wildcard_constraints:
        results=one_of([RESULTS, SEEDS]),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("pattern_ablation_summary")
    resources:
        **job_resources("pattern_ablation_summary"),
    params:
        options=settings.plot_options(config),
        code=code("pattern_ablation_summary"),
        upstream=upstream("pattern_ablation_summary"),
    script:
        "../workflow_scripts/job.py"


# Section 4.2's extraction at every snapshot of a trained model, and the held-out loss there.
rule emergence:
    input:
        model=rules.train.output.model,
        info=rules.train.output.info,
        snapshots=paths.snapshot_dir("{model}", RESULTS),
        metrics=rules.train.output.metrics,
        tokens=rules.tokenizer.output.snippets,
        blocks=rules.tokenizer.output.blocks,
        heldout=rules.tokenizer.output.heldout,
    output:
        **paths.emergence_tables("{model}", RESULTS),
    log:
        log_path("emergence/{model}.log"),
    benchmark:
        paths.emergence_benchmark("{model}", RESULTS)
    wildcard_constraints:
        model=one_of(TRAINED),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("emergence")
    resources:
        **job_resources("emergence"),
    params:
        settings=settings.emergence_settings(config),
        steps=SNAPSHOTS,
        device=config["extraction"]["device"],
        seed=config["data"]["seed"],
        code=code("emergence"),
        upstream=upstream("emergence"),
    script:
        "../workflow_scripts/job.py"


rule emergence_summary:
    input:
        **{
            table: [paths.emergence_table(m, table, RESULTS) for m in TRAINED]
            for table in paths.EMERGENCE_TABLES
        },
        simulations=[
            paths.simulation_table(v, RESULTS)
            for v in settings.emergence_variants(config)
        ],
        simulation_groups=[
            paths.simulation_groups(v, RESULTS)
            for v in settings.emergence_variants(config)
        ],
    output:
        paths.table_file("emergence", RESULTS),
    log:
        log_path("emergence_summary.log"),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("emergence_summary")
    resources:
        **job_resources("emergence_summary"),
    params:
        settings=config["claims"],
        code=code("emergence_summary"),
        upstream=upstream("emergence_summary"),
    script:
        "../workflow_scripts/job.py"


# Length generalisation over training seeds (target length_seeds): every run's length table, one table and figure.
rule length_seeds_table:
    input:
        runs=[
            paths.table_file("length_eval", RESULTS, model=run)
            for _, _, run in SEED_RUNS
        ],
    output:
        table=paths.table_file("length_seeds", RESULTS),
        figures=report_figures(LENGTH_SEEDS_FIGURE, RESULTS),
    log:
        log_path("length_seeds.log"),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("length_seeds_table")
    resources:
        **job_resources("length_seeds_table"),
    params:
        runs=[[model, seed] for model, seed, _ in SEED_RUNS],
        options=config["plot"],
        code=code("length_seeds_table"),
        upstream=upstream("length_seeds_table"),
    script:
        "../workflow_scripts/job.py"
