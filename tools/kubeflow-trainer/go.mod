module trainyard.dev/tools/kubeflow-trainer

go 1.26.0

require github.com/kubeflow/trainer/v2 v2.3.0 // indirect
