from django.contrib import admin

from .models import MachineProfile


@admin.register(MachineProfile)
class MachineProfileAdmin(admin.ModelAdmin):
    list_display = ("measured_at", "device_name", "device", "dtype", "threads", "bandwidth_gbps", "matmul_gflops",
                    "decode_step_ms", "worker")
    list_filter = ("device",)

    def has_add_permission(self, request):
        return False  # measured by workers only

    def has_change_permission(self, request, obj=None):
        return False
