"""Head ablations: does in-context learning depend on a head? The hooks and the heads' parsing
(:mod:`.head_ablation`) and the studies over every head and layer (:mod:`.ablation_study`)."""
