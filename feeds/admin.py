from django.contrib import admin, messages

from feeds import save_audit
from feeds.models import Feed, choosing
from feeds.save_warnings import feed_warnings


@admin.register(Feed)
class FeedAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "tag", "unit", "interval", "public", "bacnet_export", "created"]
    list_filter = ["public", "bacnet_export", "interval", "tag"]
    search_fields = ["name", "tag", "description"]
    list_editable = ["public"]

    def get_readonly_fields(self, request, obj=None):
        # The interval is baked into the data file once it exists.
        return ["interval", "created"] if obj is not None else ["created"]

    def changeform_view(self, request, *args, **kwargs):
        # The form's checks and the save, one change at a time (feeds.models.choosing).
        if request.method != "POST":
            return super().changeform_view(request, *args, **kwargs)
        with choosing():
            return super().changeform_view(request, *args, **kwargs)

    def save_model(self, request, obj, form, change):
        # Also the changelist's "public" column; audited by the apps above (feeds/save_audit.py).
        save_audit.audited_save(
            request.user,
            obj if change else None,
            lambda: super(FeedAdmin, self).save_model(request, obj, form, change) or obj,
            save_audit.ADMIN,
        )
        for sentence in feed_warnings(obj):
            messages.warning(request, sentence)
