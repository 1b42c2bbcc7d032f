# Mock E2B orchestrators for placement load tests. E2B's API discovers orchestrators as
# the Nomad service "orchestrator" on port 5008; these answer the same gRPC surface.
job "mock-orchestrator" {
  type = "service"

  group "orchestrator" {
    count = 50

    network {
      port "grpc"  { static = 5008 }
      port "admin" { static = 9100 }
    }

    service {
      name     = "orchestrator"
      port     = "grpc"
      provider = "nomad"
    }

    task "mock-node" {
      driver = "docker"

      config {
        # Built from deploy/mock-node.Dockerfile (static musl binary on scratch).
        image = "ghcr.io/your-org/mock-node:latest"
        ports = ["grpc", "admin"]
        args = [
          "--ip", "0.0.0.0",
          "--admin-addr", "0.0.0.0:9100",
          "--cpu-count", "192",
          "--max-starting", "3",
        ]
      }

      env {
        GRPC_PORT   = "5008"
        NODE_ID     = "${node.unique.name}"
        NODE_LABELS = "mock,${node.class}"
      }

      template {
        # Admin bearer token from Nomad Variables; never logged by mock-node.
        data        = "MOCK_NODE_ADMIN_TOKEN={{ with nomadVar \"nomad/jobs/mock-orchestrator\" }}{{ .admin_token }}{{ end }}"
        destination = "secrets/admin.env"
        env         = true
      }

      resources {
        cpu    = 500
        memory = 128
      }
    }
  }
}
