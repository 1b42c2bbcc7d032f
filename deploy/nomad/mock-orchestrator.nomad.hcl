# Mock E2B orchestrators for placement load tests against a STAGING E2B API.
#
# A system job: one mock per client of the dedicated node pool "stampede", on the client's
# own IP and port 5008, as E2B runs its orchestrators. Each registers the Nomad service
# "stampede-orchestrator", never E2B's production "orchestrator": point the staging API at
# it with NOMAD_ORCHESTRATOR_SERVICE_NAMES=stampede-orchestrator (see deploy/README.md).
# Create the pool and put clients in it first (client { node_pool = "stampede" }).
job "stampede-mock-orchestrator" {
  type      = "system"
  node_pool = "stampede"

  group "mock-orchestrator" {
    network {
      port "grpc"  { static = 5008 }
      port "admin" { static = 9100 }
    }

    service {
      name     = "stampede-orchestrator"
      port     = "grpc"
      provider = "nomad"

      # mock-node serves E2B's orchestrator health contract (HTTP GET /health) on its
      # gRPC port, as the real orchestrator's job checks it.
      check {
        type     = "http"
        path     = "/health"
        name     = "health"
        interval = "20s"
        timeout  = "5s"
      }
    }

    task "mock-node" {
      driver = "docker"

      config {
        # Built from deploy/mock-node.Dockerfile (static musl binary on scratch); the tag
        # is the stampede release it was built from. Never :latest.
        image = "ghcr.io/your-org/mock-node:0.1.0"
        ports = ["grpc", "admin"]
        args = [
          "--ip", "0.0.0.0",
          "--advertise-ip", "${attr.unique.network.ip-address}",
          "--admin-addr", "0.0.0.0:9100",
          "--cpu-count", "192",
          "--max-starting", "3",
        ]
      }

      env {
        GRPC_PORT = "5008"
        # As E2B's orchestrator job: ServiceInfo reports the Nomad node name.
        NODE_ID     = "${node.unique.name}"
        NODE_LABELS = "stampede-mock,${node.class}"
      }

      template {
        # Admin bearer token from Nomad Variables; never logged by mock-node.
        data        = "MOCK_NODE_ADMIN_TOKEN={{ with nomadVar \"nomad/jobs/stampede-mock-orchestrator\" }}{{ .admin_token }}{{ end }}"
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
